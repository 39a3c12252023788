"""``dlc-ledger prices …``: publish price books and spot price changes, list and show them.

Prices enter the system only as events (``PriceBookPublished`` on stream
``pricebook/<id>``, ``SpotPriceChanged`` on ``pricebook/spot/<resource>``), so
rating can replay them. Publishing is idempotent: the event id is derived from
the book's content, so the same file twice adds nothing, while a *different*
book under an id and ``effective_from`` already published is refused (a price
that was in force must never silently change; publish a new book instead).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID

import typer

from consumers.context import open_store
from consumers.finance_cli import FORMAT_OPTION, emit
from consumers.options import CLUSTER, parse_instant
from ledger.canonical import canonical_json
from ledger.envelopes import decode, make_envelope
from ledger.events import PriceBookPublished, SpotPriceChanged
from ledger.ids import deterministic_id
from ledger.money import parse_decimal
from ledger.prices import PriceBook, PriceSchedule, load_price_book
from ledger.store.postgres import PostgresEventStore

__all__ = [
    "PublishResult",
    "all_price_events",
    "prices_app",
    "publish_price_book",
    "publish_spot_price",
]

prices_app = typer.Typer(help="Price books and spot prices.", no_args_is_help=True)

SOURCE = "api/prices-cli"
_KEY = re.compile(r"^(gpu/[A-Za-z0-9][A-Za-z0-9._-]*|cpu|memory)$")


@dataclass(frozen=True)
class PublishResult:
    stream: str
    event_id: str
    added: bool  # False: the same content was already published


def _content_id(kind: str, payload: dict[str, Any]) -> UUID:
    digest = hashlib.sha256(canonical_json(payload)).hexdigest()
    return deterministic_id("price", kind, digest)


def all_price_events(
    store: PostgresEventStore,
) -> list[tuple[Any, PriceBookPublished | SpotPriceChanged]]:
    """Every price event in publication order, with its record."""
    out: list[tuple[Any, PriceBookPublished | SpotPriceChanged]] = []
    position = 0
    while True:
        page = store.read_by_type(
            ["PriceBookPublished", "SpotPriceChanged"], after_position=position, limit=1000
        )
        if not page:
            return out
        for record in page:
            data = decode(record.envelope)
            assert isinstance(data, PriceBookPublished | SpotPriceChanged)
            out.append((record, data))
        position = page[-1].position


def publish_price_book(
    store: PostgresEventStore, book: PriceBook, *, at: datetime | None = None
) -> PublishResult:
    """Append ``book`` as ``PriceBookPublished`` unless that exact book is already there."""
    event = book.to_event()
    payload = event.model_dump(mode="json")
    stream = f"pricebook/{book.id}"
    event_id = _content_id("book", payload)
    existing = store.read_stream(stream)
    for record in existing:
        if record.event_id == event_id:
            return PublishResult(stream, str(event_id), added=False)
        other = decode(record.envelope)
        if isinstance(other, PriceBookPublished) and other.effective_from == event.effective_from:
            raise ValueError(
                f"price book {book.id!r} effective {event.effective_from.isoformat()} is already "
                "published with different content; publish a new id or effective_from instead"
            )
    # refuses a second currency or scale (a line item must never mix them)
    PriceSchedule([e for _, e in all_price_events(store)] + [event])
    now = at or datetime.now(UTC)
    envelope = make_envelope(
        event,
        event_id=event_id,
        stream=stream,
        occurred_at=now,
        observed_at=now,
        source=SOURCE,
    )
    result = store.append([envelope], expected_versions={stream: len(existing)})
    return PublishResult(stream, str(envelope.event_id), added=bool(result.positions))


def publish_spot_price(
    store: PostgresEventStore,
    resource: str,
    rate: Decimal,
    effective_from: datetime,
    *,
    currency: str | None = None,
    at: datetime | None = None,
) -> PublishResult:
    """Append a ``SpotPriceChanged`` (currency defaults to the published books')."""
    if not _KEY.match(resource):
        raise ValueError(
            f"unknown resource key {resource!r}: use gpu/<model>, gpu/any, cpu, memory"
        )
    if rate < 0:
        raise ValueError(f"spot rate must be >= 0, got {rate}")
    events = [e for _, e in all_price_events(store)]
    books = [e for e in events if isinstance(e, PriceBookPublished)]
    if currency is None:
        if not books:
            raise ValueError("no price book published yet: pass --currency or publish a book")
        currency = books[0].currency
    event = SpotPriceChanged(
        resource=resource, currency=currency, rate=rate, effective_from=effective_from
    )
    PriceSchedule([*events, event])  # same currency as the books
    stream = f"pricebook/spot/{resource}"
    event_id = _content_id("spot", event.model_dump(mode="json"))
    for record in store.read_stream(stream):
        if record.event_id == event_id:
            return PublishResult(stream, str(event_id), added=False)
    now = at or datetime.now(UTC)
    envelope = make_envelope(
        event, event_id=event_id, stream=stream, occurred_at=now, observed_at=now, source=SOURCE
    )
    result = store.append([envelope])
    return PublishResult(stream, str(event_id), added=bool(result.positions))


_FILE = typer.Argument(..., exists=True, dir_okay=False, help="price book YAML")


@prices_app.command("publish")
def publish(file: Path = _FILE) -> None:
    """Publish a price book YAML file (idempotent)."""
    book = load_price_book(file)
    store = open_store()
    result = publish_price_book(store, book)
    word = "published" if result.added else "already published, nothing added"
    typer.echo(f"{book.id} effective {book.effective_from.isoformat()}: {word} ({result.stream})")


@prices_app.command("spot")
def spot(
    resource: str = typer.Argument(..., help="gpu/<model>, gpu/any, cpu or memory"),
    rate: str = typer.Argument(..., help='per unit-hour, a decimal like "0.85"'),
    effective_from: str = typer.Option(..., "--from", help=f"effective from: {CLUSTER}"),
    currency: str | None = typer.Option(None, "--currency"),
) -> None:
    """Record a spot price change for one resource key."""
    store = open_store()
    result = publish_spot_price(
        store,
        resource,
        parse_decimal(rate, what="rate"),
        parse_instant(effective_from, option="--from"),
        currency=currency,
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
def list_prices(fmt: str = FORMAT_OPTION) -> None:
    """Every published book and spot change, in publication order (effective_from is
    cluster time, published_at store time)."""
    store = open_store()
    emit([_summary(r, d) for r, d in all_price_events(store)], fmt)


@prices_app.command("show")
def show(book_id: str = typer.Argument(...), fmt: str = FORMAT_OPTION) -> None:
    """The rates of a price book (every published effective_from)."""
    store = open_store()
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
        raise ValueError(f"no price book {book_id!r}")
    emit(rows, fmt)
