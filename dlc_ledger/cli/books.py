"""``dlc-ledger ledger balance|export``: the trial balance and the receivables by age, and a
month's journal as a general ledger imports it.

The rows come from the billing room (:mod:`projections.billing.balances`); this module
parses options and prints them, as projected (reads never project).
"""

from __future__ import annotations

import json
from decimal import ROUND_HALF_EVEN, Decimal
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from dlc_ledger.cli.options import CLUSTER, parse_optional_instant, parse_period
from dlc_ledger.cli.tables import DocumentFormat, DocumentFormatOption, render_table
from dlc_ledger.presenters import journal_csv, journal_document
from dlc_ledger.wiring.context import open_reader
from ledger.errors import Conflict, Invalid
from projections.billing import AGE_BUCKETS, ScaleOf, currency_scales, read_books, read_journal

__all__ = ["ledger_app"]

ledger_app = typer.Typer(
    help="The books: trial balance, receivables, journal export.", no_args_is_help=True
)


#: the columns of the books that are amounts (decimal strings at full precision)
_AMOUNTS = {"debit", "credit", "balance", "open", "total", *(label for label, _, _ in AGE_BUCKETS)}


def _at_scale(rows: list[dict[str, Any]], scale_of: ScaleOf) -> list[dict[str, Any]]:
    """``rows`` with their amounts rounded half-even to the currency's scale, thousands
    grouped (``1272.74366687994`` -> ``1,272.74``), for a table."""
    out = []
    for row in rows:
        step = Decimal(1).scaleb(-scale_of(row["currency"]))
        out.append(
            {
                key: f"{Decimal(value).quantize(step, ROUND_HALF_EVEN):,f}"
                if key in _AMOUNTS and isinstance(value, str)
                else value
                for key, value in row.items()
            }
        )
    return out


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
        scale_of = currency_scales(conn)
        read = read_books(conn, scale_of, instant)
    books, aged_at, receivables = read.balance, read.aged_at, read.receivables
    if fmt is DocumentFormat.json:  # machines get the postings' full precision
        document = {"accounts": books.rows, "totals": books.totals, "receivables": receivables}
        typer.echo(json.dumps(document, indent=2, default=str))
    else:  # people get the currency's scale, as every other amount shown
        typer.echo(render_table(_at_scale(books.rows, scale_of)))
        for total in _at_scale(books.totals, scale_of):
            state = "balanced" if total["balanced"] else "NOT BALANCED"
            typer.echo(
                f"total {total['currency']}: debit {total['debit']}, "
                f"credit {total['credit']} ({state})"
            )
        typer.echo("")
        when = f" at {aged_at.isoformat()}" if aged_at is not None else ""
        typer.echo(f"receivables by age{when}")
        typer.echo(render_table(_at_scale(receivables, scale_of)))
    if not books.balanced:
        raise Conflict("the trial balance does not balance: debits and credits differ (a bug)")


class ExportFormat(StrEnum):
    csv = "csv"
    json = "json"


@ledger_app.command("export")
def export(
    period: Annotated[str, typer.Option("--period", help="The month to export, YYYY-MM (UTC).")],
    fmt: Annotated[
        ExportFormat, typer.Option("--format", help="csv (one row a posting) or json.")
    ] = ExportFormat.csv,
    output: Annotated[
        Path | None,
        typer.Option("--output", help="Write to this file instead of standard output."),
    ] = None,
) -> None:
    """A month's journal as a general ledger imports it: one line per posting (date,
    journal id, account, debit, credit at the currency's scale, memo, references to the
    invoice, subscription, occupancy and job), balanced per transaction and currency, equal
    to the trial balance's movements over the month (docs/finance.md, Journal export)."""
    month = parse_period(period)
    store = open_reader()
    with store.reading() as conn:
        found = read_journal(conn, currency_scales(conn), month)
    if fmt is ExportFormat.json:
        text = json.dumps(journal_document(found), indent=2) + "\n"
    else:
        text = journal_csv(found)
    if output is None:
        typer.echo(text, nl=False)
    else:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise Invalid(f"--output {output}: cannot write it: {exc.strerror or exc}") from exc
        typer.echo(f"{len(found.lines)} journal lines of {month} written to {output}", err=True)
    if not all(total["balanced"] for total in found.totals):
        raise Conflict(
            f"the journal of {month} does not balance: debits and credits differ (a bug)"
        )
