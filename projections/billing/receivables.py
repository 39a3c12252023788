"""What invoices still owe: paid, applied, open and the payment status, and the payments.

An invoice's open amount is its total less what was credited, paid and applied on its
period, plus what the period returned to the credit balance (``InvoiceOverSettled``: it
was settled beyond its total), every revision of it included (a void carries the period's
credit notes, payments, applied and returned credit to the re-issue, so nothing is owed
twice); a voided invoice owes nothing. Its payment status is ``voided``, ``paid``
(nothing open), ``overdue`` (``InvoiceOverdue`` was recorded and money is still open) or
``open`` (:mod:`ledger.payments`). Reads read the projection as it is.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import Connection, text

from ledger.payments import InvoiceBalance
from projections.pages import Page, check_limit, decode_cursor, encode_cursor

__all__ = [
    "INVOICE_FIGURES",
    "PAYMENT_STATUSES",
    "credit_balances",
    "invoice_payments",
    "open_credits",
    "open_invoices",
    "payment_page",
    "period_balance",
]

PAYMENT_STATUSES = ("open", "paid", "overdue", "voided")

#: SQL for an invoice row ``i`` of ``billing_invoices``: ``period_credited``, ``period_paid``,
#: ``period_applied``, ``period_returned`` (its period's, voided revisions included),
#: ``open_minor`` and ``payment_status``. Once the tick has returned an over-settlement
#: (``processes.billing.payments.return_over_settlements``) the unclipped open amount is
#: exactly ``open_minor``; the clip only hides an excess not returned yet.
#: Use as ``SELECT i.*, f.* FROM billing_invoices i {INVOICE_FIGURES}``.
INVOICE_FIGURES = (
    "CROSS JOIN LATERAL (SELECT s.credited AS period_credited, s.paid AS period_paid, "
    " s.applied AS period_applied, s.returned AS period_returned, "
    " CASE WHEN i.status = 'voided' THEN 0 "
    "  ELSE GREATEST(i.total_minor - s.credited - s.paid - s.applied + s.returned, 0) "
    "  END AS open_minor, "
    " CASE WHEN i.status = 'voided' THEN 'voided' "
    "  WHEN i.total_minor - s.credited - s.paid - s.applied + s.returned <= 0 THEN 'paid' "
    "  WHEN i.overdue_at IS NOT NULL THEN 'overdue' ELSE 'open' END AS payment_status "
    " FROM (SELECT CAST(COALESCE(sum(j.credited_minor), 0) AS bigint) AS credited, "
    "  CAST(COALESCE(sum(j.paid_minor), 0) AS bigint) AS paid, "
    "  CAST(COALESCE(sum(j.applied_minor), 0) AS bigint) AS applied, "
    "  CAST(COALESCE(sum(j.returned_minor), 0) AS bigint) AS returned "
    "  FROM billing_invoices j WHERE j.workspace = i.workspace AND j.period = i.period) s"
    ") f"
)


def period_balance(conn: Connection, invoice_id: str) -> InvoiceBalance | None:
    """The invoice's total, and what its period had credited, paid, applied and returned."""
    row = conn.execute(
        text(
            "SELECT i.total_minor, f.period_credited, f.period_paid, f.period_applied, "
            "f.period_returned "
            f"FROM billing_invoices i {INVOICE_FIGURES} WHERE i.invoice_id = :i"
        ),
        {"i": invoice_id},
    ).first()
    return None if row is None else InvoiceBalance(*(int(v) for v in row))


def open_invoices(conn: Connection, workspace: str) -> list[tuple[str, str, int]]:
    """The workspace's issued invoices with money open: (invoice id, currency, open), oldest
    period first."""
    rows = conn.execute(
        text(
            "SELECT i.invoice_id, i.currency, f.open_minor "
            f"FROM billing_invoices i {INVOICE_FIGURES} "
            "WHERE i.workspace = :w AND i.status = 'issued' AND f.open_minor > 0 "
            "ORDER BY i.period, i.issued_at, i.invoice_id"
        ),
        {"w": workspace},
    ).all()
    return [(str(i), str(c), int(o)) for i, c, o in rows]


def open_credits(conn: Connection) -> list[dict[str, Any]]:
    """Credit not yet applied in full, oldest first: overpayments' excess and over-settled
    invoices' returns (``payment_id``: the payment's, or the return's ``settlement_id``,
    which the applications name), invoice, workspace, currency and what is left."""
    return [
        dict(r)
        for r in conn.execute(
            text(
                "SELECT s.payment_id, s.invoice_id, s.workspace, s.currency, "
                "s.amount_minor - COALESCE((SELECT sum(a.amount_minor) FROM "
                " billing_credit_applications a WHERE a.payment_id = s.payment_id), 0) "
                "AS left_minor FROM ("
                " SELECT p.payment_id, p.invoice_id, p.workspace, p.currency, "
                " p.excess_minor AS amount_minor, p.position "
                " FROM billing_payments p WHERE p.excess_minor > 0 "
                " UNION ALL SELECT r.settlement_id, r.invoice_id, r.workspace, r.currency, "
                " r.amount_minor, r.position FROM billing_credit_returns r"
                ") s ORDER BY s.position"
            )
        ).mappings()
        if int(r["left_minor"]) > 0
    ]


def credit_balances(
    conn: Connection, *, workspaces: Collection[str] | None = None
) -> dict[tuple[str, str], int]:
    """(workspace, currency) -> the credit balance not applied yet (minor units)."""
    out: dict[tuple[str, str], int] = {}
    for row in open_credits(conn):
        if workspaces is not None and row["workspace"] not in workspaces:
            continue
        key = (str(row["workspace"]), str(row["currency"]))
        out[key] = out.get(key, 0) + int(row["left_minor"])
    return out


def invoice_payments(conn: Connection, invoice_id: str) -> dict[str, list[dict[str, Any]]]:
    """The invoice's payments, the credit applied to it (from which invoice), and what it
    returned to the credit balance (settled beyond its total)."""
    payments = [
        dict(r)
        for r in conn.execute(
            text(
                "SELECT payment_id, reference, amount_minor, applied_minor, excess_minor, "
                "currency, received_at, recorded_at FROM billing_payments "
                "WHERE invoice_id = :i ORDER BY position"
            ),
            {"i": invoice_id},
        ).mappings()
    ]
    applied = [
        dict(r)
        for r in conn.execute(
            text(
                "SELECT application_id, from_invoice_id, payment_id, amount_minor, currency, "
                "occurred_at FROM billing_credit_applications WHERE invoice_id = :i "
                "ORDER BY position"
            ),
            {"i": invoice_id},
        ).mappings()
    ]
    returned = [
        dict(r)
        for r in conn.execute(
            text(
                "SELECT settlement_id, amount_minor, currency, occurred_at "
                "FROM billing_credit_returns WHERE invoice_id = :i ORDER BY position"
            ),
            {"i": invoice_id},
        ).mappings()
    ]
    return {"payments": payments, "credit_applied": applied, "returned_to_credit": returned}


def payment_page(
    conn: Connection,
    *,
    invoice_id: str | None = None,
    workspace: str | None = None,
    limit: int = 100,
    cursor: str | None = None,
    workspaces: Collection[str] | None = None,
) -> Page:
    """Payments, oldest first (store order), with their invoice's period, optionally of one
    invoice or workspace; ``workspaces``: only theirs (a caller's scope)."""
    check_limit(limit)
    after = decode_cursor(cursor, int)[0] if cursor is not None else 0
    rows = [
        dict(r)
        for r in conn.execute(
            text(
                "SELECT p.payment_id, p.invoice_id, p.workspace, i.period, p.reference, "
                "p.currency, p.amount_minor, p.applied_minor, p.excess_minor, p.received_at, "
                "p.recorded_at, p.source, p.position FROM billing_payments p "
                "LEFT JOIN billing_invoices i ON i.invoice_id = p.invoice_id "
                "WHERE (CAST(:i AS text) IS NULL OR p.invoice_id = :i) "
                "AND (CAST(:w AS text) IS NULL OR p.workspace = :w) "
                "AND (CAST(:scope AS text[]) IS NULL "
                " OR p.workspace = ANY(CAST(:scope AS text[]))) "
                "AND p.position > :after ORDER BY p.position LIMIT :n"
            ),
            {"i": invoice_id, "w": workspace, "after": after, "n": limit + 1,
             "scope": None if workspaces is None else sorted(workspaces)},
        ).mappings()
    ]  # fmt: skip
    following = encode_cursor([rows[limit - 1]["position"]]) if len(rows) > limit else None
    return Page([{k: v for k, v in r.items() if k != "position"} for r in rows[:limit]], following)
