"""Listing invoices and credit notes a page at a time: the reads behind ``invoices list``,
``invoices credits list`` and ``GET /v1/invoices``.

Keyset order (period, workspace, issued_at, invoice_id), so a page never repeats or
skips an invoice while new ones are issued (:mod:`projections.pages`). A caller's
scope (its workspaces) is a condition of the query, never a filter on its rows.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import Connection, text

from ledger.errors import Invalid
from projections.billing.receivables import INVOICE_FIGURES
from projections.pages import Page, check_limit, decode_cursor, encode_cursor

__all__ = ["INVOICE_STATUSES", "credit_note_page", "invoice_page"]

INVOICE_STATUSES = ("issued", "voided")


def invoice_page(
    conn: Connection,
    *,
    workspace: str | None = None,
    period: str | None = None,
    status: str | None = None,
    limit: int = 100,
    cursor: str | None = None,
    workspaces: Collection[str] | None = None,
) -> Page:
    """Issued and voided invoices, optionally of one workspace, period (``YYYY-MM``) or
    status; ``workspaces``: only theirs (a caller's scope; None: every workspace)."""
    check_limit(limit)
    if status is not None and status not in INVOICE_STATUSES:
        raise Invalid(f"unknown status {status!r}: use {' or '.join(INVOICE_STATUSES)}")
    after = decode_cursor(cursor, str, str, str, str) if cursor is not None else [None] * 4
    rows = [
        dict(r)
        for r in conn.execute(
            text(
                "SELECT i.invoice_id, i.workspace, i.period, i.status, f.payment_status, "
                "i.currency, i.total_minor, i.credited_minor, i.paid_minor, i.applied_minor, "
                "i.returned_minor, "
                "f.open_minor, i.line_count, i.issued_at, i.recorded_at, i.overdue_at "
                f"FROM billing_invoices i {INVOICE_FIGURES} "
                "WHERE (CAST(:w AS text) IS NULL OR i.workspace = :w) "
                "AND (CAST(:p AS text) IS NULL OR i.period = :p) "
                "AND (CAST(:s AS text) IS NULL OR i.status = :s) "
                "AND (CAST(:scope AS text[]) IS NULL "
                " OR i.workspace = ANY(CAST(:scope AS text[]))) "
                "AND (CAST(:ap AS text) IS NULL "
                " OR (i.period, i.workspace, i.issued_at, i.invoice_id) "
                "> (:ap, :aw, CAST(:at AS timestamptz), :ai)) "
                "ORDER BY i.period, i.workspace, i.issued_at, i.invoice_id LIMIT :n"
            ),
            {"w": workspace, "p": period, "s": status,
             "scope": None if workspaces is None else sorted(workspaces),
             "ap": after[0], "aw": after[1], "at": after[2], "ai": after[3], "n": limit + 1},
        ).mappings()
    ]  # fmt: skip
    following = None
    if len(rows) > limit:
        last = rows[limit - 1]
        key = [last["period"], last["workspace"], last["issued_at"].isoformat(), last["invoice_id"]]
        following = encode_cursor(key)
    return Page(rows[:limit], following)


def credit_note_page(
    conn: Connection,
    *,
    invoice_id: str | None = None,
    workspace: str | None = None,
    limit: int = 100,
    cursor: str | None = None,
) -> Page:
    """Credit notes, oldest first (store order), with their invoice's workspace and period,
    optionally of one invoice or workspace."""
    check_limit(limit)
    after = decode_cursor(cursor, int)[0] if cursor is not None else 0
    rows = [
        dict(r)
        for r in conn.execute(
            text(
                "SELECT c.credit_note_id, c.invoice_id, i.workspace, i.period, c.currency, "
                "c.amount_minor, c.reason, c.recorded_at, c.position "
                "FROM billing_credit_notes c "
                "LEFT JOIN billing_invoices i ON i.invoice_id = c.invoice_id "
                "WHERE (CAST(:i AS text) IS NULL OR c.invoice_id = :i) "
                "AND (CAST(:w AS text) IS NULL OR i.workspace = :w) "
                "AND c.position > :after ORDER BY c.position LIMIT :n"
            ),
            {"i": invoice_id, "w": workspace, "after": after, "n": limit + 1},
        ).mappings()
    ]
    following = encode_cursor([rows[limit - 1]["position"]]) if len(rows) > limit else None
    return Page([{k: v for k, v in r.items() if k != "position"} for r in rows[:limit]], following)
