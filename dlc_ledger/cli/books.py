"""``dlc-ledger ledger balance``: the trial balance and the receivables by age.

The rows come from the billing room (:mod:`projections.billing.balances`); this module
parses options and prints them, as projected (reads never project).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from dlc_ledger.cli.options import CLUSTER, parse_optional_instant
from dlc_ledger.cli.tables import DocumentFormat, DocumentFormatOption, render_table
from dlc_ledger.wiring.context import open_reader
from ledger.errors import Conflict
from projections.billing import currency_scales, read_books

__all__ = ["ledger_app"]

ledger_app = typer.Typer(help="The books: trial balance, receivables.", no_args_is_help=True)


@ledger_app.command("balance")
def balance(
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            help=f"As at this instant (postings that occurred by then). Default: every "
            f"posting, receivables aged from the cluster clock. {CLUSTER}.",
        ),
    ] = None,
    fmt: DocumentFormatOption = DocumentFormat.table,
) -> None:
    """The trial balance (every account's debits, credits and balance; debits = credits in
    each currency) and each workspace's receivable by age (0-30, 31-60, 61-90, over 90 days)."""
    instant = parse_optional_instant(at, option="--at")
    store = open_reader()
    with store.reading() as conn:
        read = read_books(conn, currency_scales(conn), instant)
    books, aged_at, receivables = read.balance, read.aged_at, read.receivables
    if fmt is DocumentFormat.json:
        document = {"accounts": books.rows, "totals": books.totals, "receivables": receivables}
        typer.echo(json.dumps(document, indent=2, default=str))
    else:
        typer.echo(render_table(books.rows))
        for total in books.totals:
            state = "balanced" if total["balanced"] else "NOT BALANCED"
            typer.echo(
                f"total {total['currency']}: debit {total['debit']}, "
                f"credit {total['credit']} ({state})"
            )
        typer.echo("")
        when = f" at {aged_at.isoformat()}" if aged_at is not None else ""
        typer.echo(f"receivables by age{when}")
        typer.echo(render_table(receivables))
    if not books.balanced:
        raise Conflict("the trial balance does not balance: debits and credits differ (a bug)")
