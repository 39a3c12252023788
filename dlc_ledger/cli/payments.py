"""``dlc-ledger payments record|list``: money received against invoices.

Options in, rows out: what settles the invoice, what is an overpayment kept as the
workspace's credit balance and when a retry is a repeat are the use case's
(:func:`dlc_ledger.services.billing.record_payment`); the list is the billing view's
(:func:`projections.billing.payment_page`).
"""

from __future__ import annotations

import typer

from dlc_ledger.cli.options import (
    CLUSTER,
    CursorOption,
    LimitOption,
    parse_instant,
    print_next_cursor,
    require_known,
)
from dlc_ledger.cli.tables import FormatOption, RowFormat, emit_rows
from dlc_ledger.presenters import with_amounts
from dlc_ledger.services.billing import record_payment
from dlc_ledger.wiring.context import open_reader, open_store
from ledger.money import format_minor
from projections.billing import currency_scales, find_invoice, payment_page
from projections.names import billing_workspaces

__all__ = ["payments_app"]

payments_app = typer.Typer(help="Payments received against invoices.", no_args_is_help=True)

SOURCE = "api/payments-cli"  # the principal of payments recorded here


@payments_app.command("record")
def record(
    invoice_id: str = typer.Option(..., "--invoice", help="the invoice the money pays"),
    amount: str = typer.Option(
        ...,
        "--amount",
        help='currency units, e.g. "1200.50" (positive, no more decimals than the scale)',
    ),
    at: str = typer.Option(..., "--at", help=f"when the money was received: {CLUSTER}"),
    reference: str = typer.Option(
        ..., "--reference", help="the bank's reference; a retry with it adds nothing"
    ),
    idempotency_key: str | None = typer.Option(
        None,
        "--idempotency-key",
        help="the key a retry is recognised by (default: the reference); the same key with "
        "another payment is an error",
    ),
) -> None:
    """Record a payment against an issued invoice: what the invoice still owes is settled,
    anything beyond it is kept as the workspace's credit balance and applied to its next
    invoices."""
    received = parse_instant(at, option="--at")
    result = record_payment(
        open_store(), invoice_id, amount, received, reference, principal=SOURCE,
        key=idempotency_key,
    )  # fmt: skip
    p = result.payment

    def money(minor: int) -> str:
        return format_minor(minor, result.scale, p.currency, grouped=True)

    word = "recorded" if result.created else "already recorded, nothing added"
    over = f", {money(p.excess_minor)} kept as credit" if p.excess_minor else ""
    typer.echo(
        f"payment {p.payment_id}: {money(p.amount_minor)} on invoice {p.invoice_id} "
        f"({money(p.applied_minor)} applied{over}): {word}"
    )


@payments_app.command("list")
def list_payments(
    invoice_id: str | None = typer.Option(None, "--invoice", help="only this invoice's"),
    workspace: str | None = typer.Option(None, "--workspace", help="only this workspace's"),
    limit: LimitOption = 100,
    cursor: CursorOption = None,
    fmt: FormatOption = RowFormat.table,
) -> None:
    """Payments, oldest first, with their invoice's period and how each was split (applied
    to the invoice, excess kept as credit), a page at a time."""
    store = open_reader()
    if invoice_id is not None:
        find_invoice(store, invoice_id)  # an unknown invoice is an error, not "(no rows)"
    with store.reading() as conn:
        page = payment_page(
            conn, invoice_id=invoice_id, workspace=workspace, limit=limit, cursor=cursor
        )
        if not page.rows and cursor is None:
            require_known("workspace", workspace, billing_workspaces(conn), option="--workspace")
        scale_of = currency_scales(conn)
    emit_rows(with_amounts(page.rows, fmt, scale_of), fmt)
    print_next_cursor(page.next_cursor)
