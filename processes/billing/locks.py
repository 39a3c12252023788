"""Closing a period by hand: lock it for every workspace and issue its invoices at once.

The billing tick closes a period by itself once its end + grace has passed
(:mod:`.closing`); finance closes one earlier, at its end, with ``billing close --period P``.
Either way the lock is one ``PeriodClosed`` per period (its id over the period, so a second
close collapses) and from then on a posting dated into it is booked into the earliest open
period as an adjustment (:mod:`ledger.periods`). A dry run (:func:`preview_close`) makes
the same checks and names what the close would lock and issue, appending nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from ledger.errors import Invalid
from ledger.invoices import invoice_id
from ledger.rating import PeriodFn, calendar_months, period_end
from ledger.store.base import EventStore
from processes.billing.closing import close_periods, due_invoices, period_closed
from processes.billing.ticks import DEFAULT_GRACE
from projections.billing import closed_periods, period_workspaces

__all__ = [
    "DueInvoice",
    "PeriodClose",
    "PeriodPreview",
    "check_closable",
    "close_period",
    "preview_close",
]


@dataclass(frozen=True)
class PeriodClose:
    period: str
    closed: bool  # False: it was closed already (nothing appended)
    invoices: tuple[str, ...]  # issued by this close


@dataclass(frozen=True)
class DueInvoice:
    """An invoice a close would issue (a dry run's answer): its id is deterministic."""

    invoice_id: str
    workspace: str
    period: str


@dataclass(frozen=True)
class PeriodPreview:
    """What closing ``period`` at an instant would do, from the books as they stand."""

    period: str
    closed: bool  # False: it is closed already (nothing would be appended)
    workspaces: tuple[str, ...]  # with postings in it: their month would be locked
    invoices: tuple[DueInvoice, ...]  # due now (before the close's own billing tick)


def check_closable(period: str, now: datetime, periods: PeriodFn | None = None) -> None:
    """An :class:`Invalid` for a malformed period, or one that has not ended by ``now``: a
    month is closed once it has ended (the request's values are refused, as the CLI's)."""
    period_fn = periods or calendar_months()
    try:
        end = period_end(period, period_fn)
    except ValueError:
        raise Invalid(f"--period must be YYYY-MM, got {period!r}") from None
    if period_fn(end - timedelta(microseconds=1)).key != period:
        raise Invalid(f"--period must be YYYY-MM, got {period!r}")
    if end > now:
        raise Invalid(
            f"period {period} ends at {end.isoformat()}, after the billing instant "
            f"{now.isoformat()}: a period is closed once it has ended"
        )


def preview_close(
    store: EventStore,
    period: str,
    now: datetime,
    *,
    grace: timedelta = DEFAULT_GRACE,
    periods: PeriodFn | None = None,
) -> PeriodPreview:
    """:func:`close_period`'s dry run: the same refusals; whether it would lock ``period``,
    the workspaces whose month that locks and the invoices it would issue (those due at
    ``now`` with ``period`` closed), read from the billing view as it stands."""
    period_fn = periods or calendar_months()
    check_closable(period, now, period_fn)
    with store.snapshot() as uow:
        closed = set(closed_periods(uow))
        conn = uow.connection
        due = due_invoices(conn, closed | {period}, now, grace=grace, periods=period_fn)
        workspaces = period_workspaces(conn, period)
    return PeriodPreview(
        period,
        period not in closed,
        tuple(workspaces),
        tuple(DueInvoice(invoice_id(w, p, revision), w, p) for w, p, revision in due),
    )


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
    check_closable(period, now, period_fn)
    with store.transaction() as uow:
        uow.lock_appends()
        fresh = period not in closed_periods(uow)
        if fresh:
            uow.append([period_closed(period, now, source=source, reason=reason or "closed")])
    issued = close_periods(store, now, grace=grace, periods=period_fn)
    return PeriodClose(period, fresh, issued)
