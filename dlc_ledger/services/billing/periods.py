"""Period locks as use cases: close a month (``billing close --period P``, ``POST
/v1/ledger/periods/{period}/close``), list periods (``billing periods``, ``GET
/v1/ledger/periods``).

A month closed is locked for every workspace: a posting dated into it later (a back-dated
purchase, a refund, a late usage rating) is booked into the earliest open month as an
adjustment naming its dates, and reaches that month's invoice (docs/finance.md, Period
locks). The close first runs one billing tick at the instant (renewals, recognition,
rating up to it), so what the month holds by then is on its invoices. A dry run makes the
same checks (the instant, the period) and says what it would lock and issue, appending
nothing (not even the tick).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dlc_ledger.services.billing.ticks import tick
from dlc_ledger.services.clocks import billing_instant
from ledger.store.base import EventStore
from processes.billing import check_closable, close_period, preview_close
from projections.billing import invoice_keys, period_rows, period_workspaces
from projections.registry import catch_up_all

__all__ = ["MonthClose", "close_month", "list_periods"]


@dataclass(frozen=True)
class MonthClose:
    """What a close did (or, ``dry_run``, would do)."""

    period: str
    at: datetime  # the cluster instant it closed at
    closed: bool  # False: it was closed already (nothing appended for the lock)
    workspaces: tuple[str, ...]  # with postings in the month: whose month is locked
    #: invoice_id, workspace, period of each invoice issued (by the tick or the close; a dry
    #: run: those due before the tick, which may rate more)
    invoices: tuple[dict[str, str], ...]
    dry_run: bool = False


def close_month(
    store: EventStore,
    period: str,
    *,
    principal: str,
    at: datetime | None = None,
    force: bool = False,
    reason: str = "",
    dry_run: bool = False,
) -> MonthClose:
    """Lock ``period`` at cluster instant ``at`` (default: the billing instant, as ``billing
    run``'s; ``force`` as its) after one tick there, and issue its invoices. A period that
    has not ended by then is refused before anything is appended."""
    now = billing_instant(store, at, force=force).at
    if dry_run:
        seen = preview_close(store, period, now)
        due = tuple(
            {"invoice_id": i.invoice_id, "workspace": i.workspace, "period": i.period}
            for i in seen.invoices
        )
        return MonthClose(period, now, seen.closed, seen.workspaces, due, dry_run=True)
    check_closable(period, now)  # before the tick: a refused close appends nothing
    ticked = tick(store, now)  # issues what was due anyway: the close's answer names them too
    done = close_period(store, period, now, source=principal, reason=reason)
    catch_up_all(store)
    with store.reading() as conn:
        issued = invoice_keys(conn, [*ticked.invoices, *done.invoices])
        workspaces = period_workspaces(conn, period)
    return MonthClose(period, now, done.closed, tuple(workspaces), tuple(issued))


def list_periods(store: EventStore) -> list[dict[str, Any]]:
    """Every period with postings, invoices or a close: ``locked`` or ``open``."""
    with store.snapshot() as uow:
        return period_rows(uow)
