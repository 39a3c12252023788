"""Closing a period by hand: lock it for every workspace and issue its invoices at once.

The billing tick closes a period by itself once its end + grace has passed
(:mod:`.closing`); finance closes one earlier, at its end, with ``billing close --period P``.
Either way the lock is one ``PeriodClosed`` per period (its id over the period, so a second
close collapses) and from then on a posting dated into it is booked into the earliest open
period as an adjustment (:mod:`ledger.periods`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from ledger.errors import Conflict, Invalid
from ledger.rating import PeriodFn, calendar_months, period_end
from ledger.store.base import EventStore
from processes.billing.closing import close_periods, period_closed
from processes.billing.ticks import DEFAULT_GRACE
from projections.billing import closed_periods

__all__ = ["PeriodClose", "close_period"]


@dataclass(frozen=True)
class PeriodClose:
    period: str
    closed: bool  # False: it was closed already (nothing appended)
    invoices: tuple[str, ...]  # issued by this close


def close_period(
    store: EventStore,
    period: str,
    now: datetime,
    *,
    source: str,
    reason: str = "",
    grace: timedelta = DEFAULT_GRACE,
    periods: PeriodFn | None = None,
) -> PeriodClose:
    """Lock ``period`` (``YYYY-MM``) at cluster instant ``now``, then issue its due invoices
    (grace waived for it). Refused before the period has ended."""
    period_fn = periods or calendar_months()
    try:
        end = period_end(period, period_fn)
    except ValueError:
        raise Invalid(f"--period must be YYYY-MM, got {period!r}") from None
    if period_fn(end - timedelta(microseconds=1)).key != period:
        raise Invalid(f"--period must be YYYY-MM, got {period!r}")
    if end > now:
        raise Conflict(
            f"period {period} ends at {end.isoformat()}, after the billing instant "
            f"{now.isoformat()}: a period is closed once it has ended"
        )
    with store.transaction() as uow:
        uow.lock_appends()
        fresh = period not in closed_periods(uow)
        if fresh:
            uow.append([period_closed(period, now, source=source, reason=reason or "closed")])
    issued = close_periods(store, now, grace=grace, periods=period_fn)
    return PeriodClose(period, fresh, issued)
