"""Billing's use cases for the CLI, the API and the wiring: one tick at an instant.

Rating, accrual, period close and invoices live in the billing room
(:mod:`projections.billing`: ``ticks`` drives ``rater`` and ``closing``); the APScheduler
loop that ticks on a clock is :mod:`consumers.billing_scheduler`. A newcomer follows a
price to an invoice line through: ``ledger/prices.py`` (the book) →
``projections/billing/projection.py`` (prices and occupancies folded) →
``projections/billing/rater.py`` with ``ledger/rating.py`` and ``ledger/accounts.py``
(postings) → ``projections/billing/closing.py`` with ``ledger/invoices.py`` (the invoice)
→ ``projections/billing/reports.py`` (its lines read back).
"""

from __future__ import annotations

from projections.billing.ticks import DEFAULT_ACCRUAL_STEP, DEFAULT_GRACE, TickResult, tick

__all__ = ["DEFAULT_ACCRUAL_STEP", "DEFAULT_GRACE", "TickResult", "tick"]
