"""Which billing periods are locked, as the store holds them (:class:`ledger.periods.PeriodLocks`).

A period is closed for everyone by a ``PeriodClosed`` on :data:`ledger.periods.PERIODS_STREAM`
(a handful a year, read whole from the store: they are facts, not a table to fold) and for
one workspace by its issued invoice (``billing_invoices``). Every appender that dates a
posting (the rater, the subscriptions' tick, a purchase or a cancellation) reads them here
holding the store's append lock, so no close can slip in between its read and its append.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from ledger.catalogue import decode
from ledger.events import PeriodClosed
from ledger.periods import PERIODS_STREAM, PeriodLocks
from ledger.rating import PeriodFn
from ledger.store.base import UnitOfWork
from projections.billing.projection import catch_up_on

__all__ = [
    "closed_periods",
    "invoice_keys",
    "period_locks",
    "period_rows",
    "period_workspaces",
]


def closed_periods(uow: UnitOfWork) -> dict[str, tuple[datetime, str, str]]:
    """Each closed period -> (when it was closed, by whom, why), from its ``PeriodClosed``."""
    out: dict[str, tuple[datetime, str, str]] = {}
    for record in uow.read_stream(PERIODS_STREAM):
        data = decode(record.envelope)
        if isinstance(data, PeriodClosed) and data.period not in out:
            out[data.period] = (record.envelope.occurred_at, record.envelope.source, data.reason)
    return out


def period_locks(uow: UnitOfWork, periods: PeriodFn | None = None) -> PeriodLocks:
    """The locks as of the store's head: the billing projection is brought to it first
    (inside ``uow``), so an invoice issued a moment ago counts."""
    catch_up_on(uow)
    invoices = uow.connection.execute(
        text("SELECT workspace, period, status FROM billing_invoices")
    ).all()
    return PeriodLocks.of(
        closed_periods(uow), [(str(w), str(p), str(s)) for w, p, s in invoices], periods
    )


def period_rows(uow: UnitOfWork) -> list[dict[str, Any]]:
    """Every period with postings or a close: locked or open, its invoices, who closed it
    (the billing view as it stands: a read never runs the projector)."""
    closed = closed_periods(uow)
    rows = uow.connection.execute(
        text(
            "SELECT p.period, "
            " (SELECT count(*) FROM billing_invoices i WHERE i.period = p.period "
            "  AND i.status = 'issued') AS issued, "
            " (SELECT count(DISTINCT t.workspace) FROM billing_transactions t "
            "  WHERE t.period = p.period AND t.workspace IS NOT NULL) AS workspaces "
            "FROM (SELECT DISTINCT period FROM billing_transactions WHERE period IS NOT NULL "
            " UNION SELECT period FROM billing_invoices UNION SELECT unnest(CAST(:c AS text[]))) p "
            "ORDER BY p.period"
        ),
        {"c": sorted(closed)},
    ).all()
    out = []
    for period, issued, workspaces in rows:
        close = closed.get(str(period))
        out.append(
            {
                "period": str(period),
                "status": "locked" if close is not None else "open",
                "workspaces": int(workspaces),
                "invoices": int(issued),
                "closed_at": close[0] if close else None,
                "closed_by": close[1] if close else None,
                "reason": close[2] if close else None,
            }
        )
    return out


def period_workspaces(conn: Connection, period: str) -> list[str]:
    """The workspaces with postings in ``period`` (whose month a close locks), sorted."""
    rows = conn.execute(
        text(
            "SELECT DISTINCT workspace FROM billing_transactions "
            "WHERE period = :p AND workspace IS NOT NULL ORDER BY workspace"
        ),
        {"p": period},
    ).scalars()
    return [str(w) for w in rows]


def invoice_keys(conn: Connection, invoice_ids: list[str]) -> list[dict[str, str]]:
    """``invoice_id``, ``workspace`` and ``period`` of the invoices named, in (period,
    workspace) order: what a close's answer says it issued."""
    rows = conn.execute(
        text(
            "SELECT invoice_id, workspace, period FROM billing_invoices "
            "WHERE invoice_id = ANY(:ids) ORDER BY period, workspace, invoice_id"
        ),
        {"ids": invoice_ids},
    ).all()
    return [{"invoice_id": str(i), "workspace": str(w), "period": str(p)} for i, w, p in rows]
