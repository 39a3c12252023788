"""The one billing tick at a cluster instant: the subscriptions' renewals, expiries and
recognition due, then rating, accrual and the due periods' close.

Subscriptions go first so that a term ordered by ``now`` is invoiced by this tick's close.
``dlc-ledger billing run``, the API's writes, ``billing serve`` and ``up`` (through
:mod:`consumers.billing_scheduler`) all call this one function.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from ledger.rating import PeriodFn
from ledger.store.base import EventStore
from processes.billing import DEFAULT_ACCRUAL_STEP, DEFAULT_GRACE, TickResult, tick
from processes.subscriptions import advance

__all__ = ["billing_tick"]


def billing_tick(
    store: EventStore,
    now: datetime,
    *,
    grace: timedelta = DEFAULT_GRACE,
    accrual_step: timedelta = DEFAULT_ACCRUAL_STEP,
    periods: PeriodFn | None = None,
    due_days: int | None = None,
) -> TickResult:
    """Advance the subscriptions to ``now``, then rate, accrue and close: the result counts
    both parts' appends (renewals, expiries and days recognised beside the rating)."""
    booked = advance(store, now)
    result = tick(
        store,
        now,
        grace=grace,
        accrual_step=accrual_step,
        periods=periods,
        due_days=due_days,
    )
    return replace(
        result,
        renewed=booked.renewed,
        renewal_failures=booked.renewal_failures,
        expired=booked.expired,
        recognised=booked.recognised,
        sla_assessed=booked.sla_assessed,
        sla_credited_minor=booked.sla_credited_minor,
    )
