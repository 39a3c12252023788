"""Closing billing periods: one ``InvoiceIssued`` per workspace and due period.

A period is due once its end + the grace window has passed and it has postings but no
issued invoice (a voided one reopens it: the next close issues revision + 1). The
invoice is built from the posted transactions only (:func:`ledger.invoices.build_invoice`),
in the same transaction that read them, under the store's append lock; its lines are
rounded once each from their precise sums and the rounding is posted with it
(:func:`ledger.invoices.invoice_rounding`, account ``revenue/rounding``).

Period locks (issue 47): a period closed by hand (``billing close --period P``) is due at
once, grace or not; and once a period's end + grace has passed, the close that invoices it
also locks it for every workspace (``PeriodClosed`` on :data:`ledger.periods.PERIODS_STREAM`),
so a posting dated into it later is booked into the open period (:mod:`ledger.periods`).

Poison (issue 44): a (workspace, period) whose invoice cannot be built (a total beyond
the invoice's bounds from a fat-fingered price, arithmetic that overflows:
:func:`ledger.store.failures.is_poison`) is dead-lettered (source ``scheduler/close``,
reason ``close-failed``, payload the workspace and period) and left open; the other
periods are closed. Every tick tries it again (after a credit or a corrected price), the
letter reopening while it still fails.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta

import orjson
from sqlalchemy import Connection, text

from ledger.accounts import transaction_envelope
from ledger.envelopes import Envelope, make_envelope
from ledger.events import LedgerTransactionPosted, PeriodClosed
from ledger.ids import deterministic_id
from ledger.invoices import build_invoice, invoice_rounding
from ledger.periods import PERIODS_STREAM
from ledger.rating import PeriodFn, calendar_months, period_end
from ledger.store.base import EventStore
from ledger.store.failures import is_poison
from projections.billing import catch_up_on, closed_periods

__all__ = [
    "CLOSE_FAILED_SOURCE",
    "CLOSING_SOURCE",
    "close_periods",
    "due_invoices",
    "period_closed",
]

#: The ``source`` of the invoices a period close issues.
CLOSING_SOURCE = "scheduler"
#: The ``source`` of the dead letter of a period that cannot be closed.
CLOSE_FAILED_SOURCE = "scheduler/close"


def _due(conn: Connection) -> list[tuple[str, str]]:
    """(workspace, period) pairs with postings and no issued invoice."""
    rows = conn.execute(
        text(
            "SELECT DISTINCT t.workspace, t.period FROM billing_transactions t "
            "WHERE t.period IS NOT NULL AND t.workspace IS NOT NULL AND NOT EXISTS ("
            " SELECT 1 FROM billing_invoices i WHERE i.workspace = t.workspace "
            " AND i.period = t.period AND i.status = 'issued') "
            "ORDER BY t.period, t.workspace"
        )
    ).all()
    return [(str(w), str(p)) for w, p in rows]


def due_invoices(
    conn: Connection,
    closed: Collection[str],
    now: datetime,
    *,
    grace: timedelta,
    periods: PeriodFn,
) -> list[tuple[str, str, int]]:
    """(workspace, period, revision) of each invoice a close at ``now`` issues: a period
    with postings and no issued invoice, whose end + ``grace`` has passed or that is
    ``closed`` (by hand: grace waived). One rule for the close and its dry run."""
    return [
        (workspace, period, _revision(conn, workspace, period))
        for workspace, period in _due(conn)
        if period in closed or period_end(period, periods) + grace <= now
    ]


def period_closed(period: str, now: datetime, *, source: str, reason: str) -> Envelope:
    """The ``PeriodClosed`` of ``period``: one per period (its id over the period), so a
    second close, by hand or by a tick, is collapsed by the store."""
    return make_envelope(
        PeriodClosed(period=period, reason=reason),
        event_id=deterministic_id("event", "PeriodClosed", period),
        stream=PERIODS_STREAM,
        occurred_at=now,
        observed_at=now,
        source=source,
    )


def _locks(
    conn: Connection,
    closed: Collection[str],
    now: datetime,
    grace: timedelta,
    period_fn: PeriodFn,
) -> list[Envelope]:
    """The ``PeriodClosed`` of every period with postings whose end + grace has passed."""
    periods = conn.execute(
        text("SELECT DISTINCT period FROM billing_transactions WHERE period IS NOT NULL")
    ).scalars()
    return [
        period_closed(p, now, source=CLOSING_SOURCE, reason="invoiced by the billing run")
        for p in sorted(str(p) for p in periods)
        if p not in closed and period_end(p, period_fn) + grace <= now
    ]


def _revision(conn: Connection, workspace: str, period: str) -> int:
    """How many invoices (voided ones included) the period already had."""
    return int(
        conn.execute(
            text("SELECT count(*) FROM billing_invoices WHERE workspace = :w AND period = :p"),
            {"w": workspace, "p": period},
        ).scalar_one()
    )


def _invoiced_transactions(
    conn: Connection, workspace: str, period: str
) -> list[LedgerTransactionPosted]:
    return [
        LedgerTransactionPosted.model_validate(data)
        for (data,) in conn.execute(
            text(
                "SELECT data FROM billing_transactions "
                "WHERE period = :p AND workspace = :w "
                "AND (usage_period IS NOT NULL OR data->'charge' IS NOT NULL) "
                "ORDER BY position"
            ),
            {"p": period, "w": workspace},
        )
    ]


def _workloads(conn: Connection, txns: Sequence[LedgerTransactionPosted]) -> dict[str, str]:
    """The services and notebooks among the transactions' jobs: uid -> ``service ns/name``."""
    uids = sorted({t.usage.job_uid for t in txns if t.usage is not None})
    rows = conn.execute(
        text(
            "SELECT job_uid, workload || ' ' || namespace || '/' || name FROM billing_workloads "
            "WHERE job_uid = ANY(:u)"
        ),
        {"u": uids},
    )
    return {uid: label for uid, label in rows}


def close_periods(
    store: EventStore,
    now: datetime,
    *,
    grace: timedelta,
    periods: PeriodFn | None = None,
) -> tuple[str, ...]:
    """Issue one invoice per workspace per period whose end + ``grace`` <= ``now``; the
    ids issued, in (period, workspace) order."""
    period_fn = periods or calendar_months()
    issued: list[str] = []
    with store.transaction() as uow:
        conn = uow.connection
        uow.lock_appends()
        catch_up_on(uow)
        envelopes: list[Envelope] = []
        closed = closed_periods(uow)
        for workspace, period, revision in due_invoices(
            conn, closed, now, grace=grace, periods=period_fn
        ):
            txns = _invoiced_transactions(conn, workspace, period)
            try:
                invoice = build_invoice(
                    workspace,
                    period,
                    txns,
                    now,
                    revision=revision,
                    workloads=_workloads(conn, txns),
                )
                event_id = deterministic_id("event", "InvoiceIssued", invoice.invoice_id)
                closing = [
                    make_envelope(
                        invoice,
                        event_id=event_id,
                        stream=f"invoice/{invoice.invoice_id}",
                        occurred_at=now,
                        observed_at=now,
                        source=CLOSING_SOURCE,
                    )
                ]
                rounding = invoice_rounding(invoice, cause_event_ids=[str(event_id)])
                if rounding is not None:
                    closing.append(transaction_envelope(rounding, now))
            except Exception as exc:
                if not is_poison(exc):
                    raise
                uow.record_dead_letter(
                    source=CLOSE_FAILED_SOURCE,
                    reason="close-failed",
                    error=f"workspace {workspace}, period {period}: {type(exc).__name__}: {exc}",
                    payload=orjson.dumps({"workspace": workspace, "period": period}),
                )
                continue
            envelopes.extend(closing)
            issued.append(invoice.invoice_id)
        envelopes.extend(_locks(conn, closed, now, grace, period_fn))
        if envelopes:
            uow.append(envelopes, on_conflict="dead-letter")
    return tuple(issued)
