"""Listing invoices a page at a time: the read behind ``invoices list`` and
``GET /v1/invoices``.

Keyset order (period, workspace, issued_at, invoice_id), so a page never repeats or
skips an invoice while new ones are issued (:mod:`projections.pages`). A caller's
scope (its workspaces) is a condition of the query, never a filter on its rows.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import Connection, text

from projections.pages import Page, check_limit, decode_cursor, encode_cursor

__all__ = ["INVOICE_STATUSES", "invoice_page"]

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
        raise ValueError(f"unknown status {status!r}: use {' or '.join(INVOICE_STATUSES)}")
    after = decode_cursor(cursor, str, str, str, str) if cursor is not None else [None] * 4
    rows = [
        dict(r)
        for r in conn.execute(
            text(
                "SELECT invoice_id, workspace, period, status, currency, total_minor, "
                "credited_minor, line_count, issued_at, recorded_at FROM billing_invoices "
                "WHERE (CAST(:w AS text) IS NULL OR workspace = :w) "
                "AND (CAST(:p AS text) IS NULL OR period = :p) "
                "AND (CAST(:s AS text) IS NULL OR status = :s) "
                "AND (CAST(:scope AS text[]) IS NULL OR workspace = ANY(CAST(:scope AS text[]))) "
                "AND (CAST(:ap AS text) IS NULL OR (period, workspace, issued_at, invoice_id) "
                "> (:ap, :aw, CAST(:at AS timestamptz), :ai)) "
                "ORDER BY period, workspace, issued_at, invoice_id LIMIT :n"
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
