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

from datetime import datetime, timedelta

from ledger.rating import PeriodFn
from ledger.store.base import EventStore
from projections.billing import ticks
from projections.billing.ticks import DEFAULT_ACCRUAL_STEP, DEFAULT_GRACE, TickResult
from projections.registry import catch_up_all
from projections.subscriptions import advance

__all__ = ["DEFAULT_ACCRUAL_STEP", "DEFAULT_GRACE", "TickResult", "tick"]


def tick(
    store: EventStore,
    now: datetime,
    *,
    grace: timedelta = DEFAULT_GRACE,
    accrual_step: timedelta = DEFAULT_ACCRUAL_STEP,
    periods: PeriodFn | None = None,
) -> TickResult:
    """One billing tick at cluster instant ``now``: the subscriptions' renewals, expiries
    and recognition due (:func:`projections.subscriptions.advance`), then rating and
    closing (:func:`projections.billing.ticks.tick`), then every read model to the head:
    a write use case, so the reads after it are current."""
    advance(store, now)  # subscription terms ordered by now are billed in this close
    result = ticks.tick(store, now, grace=grace, accrual_step=accrual_step, periods=periods)
    catch_up_all(store)
    return result
