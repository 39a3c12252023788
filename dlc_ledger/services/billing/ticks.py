"""Billing's use cases for the CLI, the API and the wiring: one tick at an instant.

Rating, accrual, period close and invoices are the billing context's process steps
(:mod:`processes.billing`: ``ticks`` drives ``rater`` and ``closing``; :mod:`processes.tick`
runs the subscriptions first), over its view (:mod:`projections.billing`); the APScheduler
loop that ticks on a clock is :mod:`consumers.billing_scheduler`. A newcomer follows a
price to an invoice line through: ``ledger/prices.py`` (the book) →
``projections/billing/projection.py`` (prices and occupancies folded) →
``processes/billing/rater.py`` with ``ledger/rating.py`` and ``ledger/accounts.py``
(postings) → ``processes/billing/closing.py`` with ``ledger/invoices.py`` (the invoice)
→ ``projections/billing/reports.py`` (its lines read back).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ledger.rating import PeriodFn
from ledger.store.base import EventStore
from processes.billing import DEFAULT_ACCRUAL_STEP, DEFAULT_GRACE, TickResult
from processes.tick import billing_tick
from projections.registry import catch_up_all

__all__ = ["tick"]


def tick(
    store: EventStore,
    now: datetime,
    *,
    grace: timedelta = DEFAULT_GRACE,
    accrual_step: timedelta = DEFAULT_ACCRUAL_STEP,
    periods: PeriodFn | None = None,
    due_days: int | None = None,
) -> TickResult:
    """One billing tick at cluster instant ``now`` (:func:`processes.tick.billing_tick`:
    the subscriptions' renewals, expiries and recognition due, then rating and closing),
    then every read model to the head: a write use case, so the reads after it are
    current."""
    result = billing_tick(
        store,
        now,
        grace=grace,
        accrual_step=accrual_step,
        periods=periods,
        due_days=due_days,
    )
    catch_up_all(store)
    return result
