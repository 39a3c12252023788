"""Invoices as the billing projection holds them: find one (scoped), read one whole.

Invoices are events (``InvoiceIssued`` on ``invoice/<id>``), never edited; voids and credit
notes are the billing context's process steps (:mod:`processes.billing.corrections`).
Reads read the projection as it is.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text

from ledger.errors import NotFound
from ledger.store.base import EventStore
from projections.billing.receivables import INVOICE_FIGURES, invoice_payments
from projections.billing.reports import invoice_job_costs, invoice_lines

__all__ = ["CREDIT_NOTES_ACCOUNT", "Invoice", "InvoiceDetail", "find_invoice", "invoice_detail"]

CREDIT_NOTES_ACCOUNT = "revenue/credit-notes"


@dataclass(frozen=True)
class Invoice:
    """An invoice's state as the billing projection holds it."""

    invoice_id: str
    workspace: str
    period: str
    currency: str
    total_minor: int
    credited_minor: int
    status: str  # issued | voided
    open_minor: int = 0  # what its period still owes (docs/finance.md, "Payments and receivables")
    payment_status: str = "open"  # open | paid | overdue | voided


@dataclass(frozen=True)
class InvoiceDetail:
    """One invoice as stored by the billing projection, row by row."""

    header: dict[str, Any]  # every column of billing_invoices
    lines: list[dict[str, Any]]  # each with "jobs": the line's per-job breakdown
    credit_notes: list[dict[str, Any]]
    payments: list[dict[str, Any]] = field(default_factory=list)
    credit_applied: list[dict[str, Any]] = field(default_factory=list)
    # what it returned to the credit balance (InvoiceOverSettled: settled beyond its total)
    returned_to_credit: list[dict[str, Any]] = field(default_factory=list)


def find_invoice(
    store: EventStore, invoice_id: str, *, workspaces: Collection[str] | None = None
) -> Invoice:
    """The invoice as projected; ``workspaces`` (a caller's scope): another workspace's
    invoice is not found."""
    with store.snapshot() as uow:
        conn = uow.connection
        row = conn.execute(
            text(
                "SELECT i.invoice_id, i.workspace, i.period, i.currency, i.total_minor, "
                "i.credited_minor, i.status, f.open_minor, f.payment_status "
                f"FROM billing_invoices i {INVOICE_FIGURES} WHERE i.invoice_id = :i AND "
                "(CAST(:scope AS text[]) IS NULL OR i.workspace = ANY(CAST(:scope AS text[])))"
            ),
            {"i": invoice_id, "scope": None if workspaces is None else sorted(workspaces)},
        ).first()
    if row is None:
        raise NotFound(f"no invoice {invoice_id!r}")
    return Invoice(*row)


def invoice_detail(
    store: EventStore, invoice_id: str, *, workspaces: Collection[str] | None = None
) -> InvoiceDetail:
    """The invoice header (with ``open_minor`` and ``payment_status``) with its lines (each
    with its jobs), credit notes, payments and the credit applied to it (of
    ``workspaces`` only, when given: see :func:`find_invoice`)."""
    find_invoice(store, invoice_id, workspaces=workspaces)
    with store.snapshot() as uow:
        conn = uow.connection
        header = (
            conn.execute(
                text(
                    "SELECT i.*, f.open_minor, f.payment_status "
                    f"FROM billing_invoices i {INVOICE_FIGURES} WHERE i.invoice_id = :i"
                ),
                {"i": invoice_id},
            )
            .mappings()
            .one()
        )
        received = invoice_payments(conn, invoice_id)
        lines = invoice_lines(conn, invoice_id)
        jobs = invoice_job_costs(conn, invoice_id)
        notes = [
            dict(r)
            for r in conn.execute(
                text(
                    "SELECT credit_note_id, amount_minor, currency, reason, recorded_at "
                    "FROM billing_credit_notes WHERE invoice_id = :i ORDER BY position"
                ),
                {"i": invoice_id},
            ).mappings()
        ]
    for line in lines:
        line["jobs"] = jobs.get(line["line_no"], [])
    # position is the projection's bookkeeping, not part of the invoice
    return InvoiceDetail(
        {k: v for k, v in header.items() if k != "position"},
        lines,
        notes,
        received["payments"],
        received["credit_applied"],
        received["returned_to_credit"],
    )
