"""An invoice line followed back to the cluster facts that caused it: the audit trail the
demo prints (invoice line → its largest job → that job's ledger transactions → the
occupancy events each one names as its cause)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from sqlalchemy import Connection, text

from ledger.store.base import RecordedEvent, UnitOfWork
from ledger.store.views import job_time_span_sql
from projections.billing.reports import invoice_job_costs

__all__ = [
    "InvoiceTrail",
    "largest_gpu_line_trail",
    "subscription_lines",
    "trace_span_seconds",
]


@dataclass(frozen=True)
class InvoiceTrail:
    line: dict[str, Any]  # the line, with its invoice's currency, workspace, period, total
    invoices: int  # invoices issued in all
    jobs: list[dict[str, Any]]  # the line's per-job breakdown
    job_uid: str | None  # its largest job
    postings: list[tuple[dict[str, Any], int]]  # that job's transactions: (data, position)
    causes: list[RecordedEvent]  # the events those transactions name as causes


def largest_gpu_line_trail(uow: UnitOfWork) -> InvoiceTrail | None:
    """The trail of the largest GPU invoice line (None: no invoice yet)."""
    conn = uow.connection
    line = (
        conn.execute(
            text(
                "SELECT l.invoice_id, l.line_no, l.resource, l.billing_mode, l.rate, "
                "l.quantity, l.unit, l.amount_minor, l.amount_precise, l.transaction_ids, "
                "i.currency, i.workspace, i.period, i.total_minor FROM billing_invoice_lines l "
                "JOIN billing_invoices i USING (invoice_id) "
                "WHERE l.resource LIKE 'gpu/%' ORDER BY l.amount_minor DESC LIMIT 1"
            )
        )
        .mappings()
        .first()
    )
    if line is None:
        return None
    invoices = int(conn.execute(text("SELECT count(*) FROM billing_invoices")).scalar_one())
    jobs = invoice_job_costs(conn, line["invoice_id"]).get(line["line_no"], [])
    job = max(jobs, key=lambda j: j["amount_minor_precise"])["job_uid"] if jobs else None
    postings = [
        (dict(data), int(position))
        for data, position in conn.execute(
            text(
                "SELECT data, position FROM billing_transactions "
                "WHERE transaction_id = ANY(:ids) AND job_uid = :job ORDER BY position"
            ),
            {"ids": list(line["transaction_ids"]), "job": job},
        ).all()
    ]
    cause_ids: list[str] = []
    for data, _ in postings:
        cause_ids += [c for c in data["cause_event_ids"] if c not in cause_ids]
    causes = uow.read_ids([UUID(c) for c in cause_ids])
    return InvoiceTrail(dict(line), invoices, jobs, job, postings, causes)


def trace_span_seconds(uow: UnitOfWork) -> float:
    """Cluster seconds between the first and the last job fact stored (0: none)."""
    value = uow.connection.execute(text(job_time_span_sql())).scalar_one()
    return float(value or 0)


def subscription_lines(conn: Connection) -> list[dict[str, Any]]:
    """The subscription lines (terms ordered, refunds) of every issued invoice, in order."""
    return [
        dict(r)
        for r in conn.execute(
            text(
                "SELECT i.period, i.workspace, l.description, l.amount_minor, i.currency "
                "FROM billing_invoice_lines l JOIN billing_invoices i USING (invoice_id) "
                "WHERE l.resource LIKE 'subscription/%' AND i.status = 'issued' "
                "ORDER BY i.period, i.workspace, l.line_no"
            )
        ).mappings()
    ]
