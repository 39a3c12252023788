"""``dlc-ledger prices …``: publish price books and spot price changes, list and show them.

Prices enter the system only as events (``PriceBookPublished`` on stream
``pricebook/<id>``, ``SpotPriceChanged`` on ``pricebook/spot/<resource>``), so
rating can replay them. Publishing is idempotent: the event id is derived from
the book's content, so the same file twice adds nothing, while a *different*
book under an id and ``effective_from`` already published is refused (a price
that was in force must never silently change; publish a new book instead).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from dlc_ledger.cli.options import (
    CLUSTER,
    CursorOption,
    LimitOption,
    parse_instant,
    print_next_cursor,
)
from dlc_ledger.cli.tables import FormatOption, RowFormat, emit_rows
from dlc_ledger.services.billing import publish_price_book, publish_spot_price
from dlc_ledger.services.yaml_files import load_price_book
from dlc_ledger.wiring.context import open_reader, open_store, settings
from ledger.catalogue import decode
from ledger.errors import NotFound
from ledger.events import PriceBookPublished, SpotPriceChanged
from ledger.money import parse_decimal
from projections.pages import decode_cursor, encode_cursor

__all__ = ["prices_app"]

prices_app = typer.Typer(help="Price books and spot prices.", no_args_is_help=True)

_FILE = typer.Argument(..., exists=True, dir_okay=False, help="price book YAML")
_FORCE = typer.Option(
    False, "--force", help="Publish despite a duplicate effective_from or a rate above the bound."
)
_EFFECTIVE_AT = typer.Option(
    None,
    "--effective-at",
    help="Cluster time of the publication (ISO; default now), e.g. a replay's epoch. "
    "When rates apply is the book's own effective_from.",
)


@prices_app.command("publish")
def publish(
    file: Path = _FILE,
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Check the book and print the event; append nothing."
    ),
    force: bool = _FORCE,
    effective_at: str | None = _EFFECTIVE_AT,
) -> None:
    """Publish a price book YAML file (idempotent)."""
    book = load_price_book(file)
    store = open_store()
    result = publish_price_book(
        store,
        book,
        at=parse_instant(effective_at, option="--effective-at") if effective_at else None,
        force=force,
        max_rate=settings().max_rate,
        dry_run=dry_run,
    )
    head = f"{book.id} effective {book.effective_from.isoformat()}"
    if result.dry_run:
        rates = [
            f"{mode} {key} {rate}"
            for mode, table in (("public", book.rates.public), ("spot", book.rates.spot))
            for key, rate in sorted(table.items())
        ]
        typer.echo(
            f"would append PriceBookPublished to {result.stream}: {head}, {book.currency} "
            f"scale {book.scale}, idle x{book.idle_multiplier}; {'; '.join(rates)}"
        )
        typer.echo("appended nothing (--dry-run)")
        return
    word = "published" if result.added else "already published, nothing added"
    typer.echo(f"{head}: {word} ({result.stream})")


@prices_app.command(
    "spot",
    # a negative RATE reaches the command (and its clear error), not click's option parser
    context_settings={"ignore_unknown_options": True},
)
def spot(
    resource: str = typer.Argument(..., help="gpu/<model>, gpu/any, cpu or memory"),
    rate: str = typer.Argument(..., help='per unit-hour, a decimal like "0.85"'),
    effective_from: str = typer.Option(..., "--from", help=f"effective from: {CLUSTER}"),
    currency: str | None = typer.Option(None, "--currency"),
    force: bool = typer.Option(
        False, "--force", help="Record despite an unknown flavor or a rate above the bound."
    ),
) -> None:
    """Record a spot price change for one resource key."""
    store = open_store()
    result = publish_spot_price(
        store,
        resource,
        parse_decimal(rate, what="rate"),
        parse_instant(effective_from, option="--from"),
        currency=currency,
        force=force,
        max_rate=settings().max_rate,
    )
    word = "recorded" if result.added else "already recorded, nothing added"
    typer.echo(f"spot {resource} {rate} from {effective_from}: {word}")


def _summary(record: Any, data: PriceBookPublished | SpotPriceChanged) -> dict[str, Any]:
    if isinstance(data, PriceBookPublished):
        return {
            "kind": "book",
            "id": data.book_id,
            "currency": data.currency,
            "effective_from": data.effective_from.isoformat(),
            "published_at": record.recorded_at.isoformat(),
            "rates": len(data.rates.public) + len(data.rates.spot),
        }
    return {
        "kind": "spot",
        "id": data.resource,
        "currency": data.currency,
        "effective_from": data.effective_from.isoformat(),
        "published_at": record.recorded_at.isoformat(),
        "rates": str(data.rate),
    }


@prices_app.command("list")
def list_prices(
    limit: LimitOption = 100, cursor: CursorOption = None, fmt: FormatOption = RowFormat.table
) -> None:
    """Published books and spot changes, in publication order, a page at a time
    (effective_from is cluster time, published_at store time)."""
    after = decode_cursor(cursor, int)[0] if cursor is not None else 0
    store = open_reader()
    page = store.read_by_type(
        ["PriceBookPublished", "SpotPriceChanged"], after_position=after, limit=limit + 1
    )
    rows = []
    for record in page[:limit]:
        data = decode(record.envelope)
        assert isinstance(data, PriceBookPublished | SpotPriceChanged)
        rows.append(_summary(record, data))
    emit_rows(rows, fmt)
    if len(page) > limit:
        print_next_cursor(encode_cursor([page[limit - 1].position]))


@prices_app.command("show")
def show(book_id: str = typer.Argument(...), fmt: FormatOption = RowFormat.table) -> None:
    """The rates of a price book (every published effective_from)."""
    store = open_reader()
    rows: list[dict[str, Any]] = []
    for record in store.read_stream(f"pricebook/{book_id}"):
        data = decode(record.envelope)
        if not isinstance(data, PriceBookPublished):
            continue
        for mode, table in (("public", data.rates.public), ("spot", data.rates.spot)):
            for key, value in sorted(table.items()):
                rows.append(
                    {
                        "book": data.book_id,
                        "effective_from": data.effective_from.isoformat(),
                        "mode": mode,
                        "resource": key,
                        "rate": str(value),
                        "currency": data.currency,
                    }
                )
        rows.append(
            {
                "book": data.book_id,
                "effective_from": data.effective_from.isoformat(),
                "mode": "idle",
                "resource": "multiplier",
                "rate": str(data.idle_multiplier),
                "currency": data.currency,
            }
        )
    if not rows:
        raise NotFound(f"no price book {book_id!r}")
    emit_rows(rows, fmt)
