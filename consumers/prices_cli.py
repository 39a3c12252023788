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

from consumers.context import open_store, settings
from consumers.finance_cli import FORMAT_OPTION, emit
from consumers.options import CLUSTER, CursorOption, LimitOption, parse_instant, print_next_cursor
from ledger.canonical import canonical_json
from ledger.envelopes import decode, make_envelope
from ledger.events import PriceBookPublished, SpotPriceChanged
from ledger.ids import deterministic_id
from ledger.money import parse_decimal
from ledger.prices import (
    DEFAULT_MAX_RATE,
    NoApplicableRate,
    PriceBook,
    PriceSchedule,
    implausible_rates,
    load_price_book,
)
from ledger.store.postgres import PostgresEventStore
from projections.pages import decode_cursor, encode_cursor

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
    added: bool  # False: the same content was already published (or a dry run)
    dry_run: bool = False


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


def _refuse_implausible(
    event: PriceBookPublished | SpotPriceChanged, bound: Decimal | None, what: str
) -> None:
    if bound is None:
        return
    high = implausible_rates(event, bound)
    if high:
        raise ValueError(
            f"{what}: {', '.join(high)} above the sanity bound of {bound} per unit-hour "
            "(DLC_MAX_RATE); check the file, or pass --force if the rate is meant"
        )


def publish_price_book(
    store: PostgresEventStore,
    book: PriceBook,
    *,
    at: datetime | None = None,
    force: bool = False,
    max_rate: Decimal | None = DEFAULT_MAX_RATE,
    dry_run: bool = False,
) -> PublishResult:
    """Append ``book`` as ``PriceBookPublished`` unless that exact book is already there.

    Unless ``force``: a book taking effect at the same instant as another published
    book (which it would silently override) or with a rate above ``max_rate`` is
    refused. ``at`` is the publication's cluster time (default now).
    """
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
    published = [e for _, e in all_price_events(store)]
    if not force:
        same = sorted(
            e.book_id
            for e in published
            if isinstance(e, PriceBookPublished) and e.effective_from == event.effective_from
        )
        if same:
            raise ValueError(
                f"price book {book.id!r} takes effect at {event.effective_from.isoformat()}, "
                f"the same instant as published book(s) {', '.join(same)}, which it would "
                "silently override; choose another effective_from, or pass --force"
            )
        _refuse_implausible(event, max_rate, f"price book {book.id!r}")
    # refuses a second currency or scale (a line item must never mix them)
    PriceSchedule([*published, event])
    if dry_run:
        return PublishResult(stream, str(event_id), added=False, dry_run=True)
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
    force: bool = False,
    max_rate: Decimal | None = DEFAULT_MAX_RATE,
) -> PublishResult:
    """Append a ``SpotPriceChanged`` (currency defaults to the published books').

    Unless ``force``: a resource the book in force at ``effective_from`` does not
    price, or a rate above ``max_rate``, is refused.
    """
    if not _KEY.match(resource):
        raise ValueError(
            f"unknown resource key {resource!r}: use gpu/<model>, gpu/any, cpu, memory"
        )
    if rate < 0:
        raise ValueError(f"a spot rate cannot be negative, got {rate}")
    events = [e for _, e in all_price_events(store)]
    books = [e for e in events if isinstance(e, PriceBookPublished)]
    if currency is None:
        if not books:
            raise ValueError("no price book published yet: pass --currency or publish a book")
        currency = books[0].currency
    event = SpotPriceChanged(
        resource=resource, currency=currency, rate=rate, effective_from=effective_from
    )
    schedule = PriceSchedule([*events, event])  # same currency as the books
    if not force:
        _known_flavor(schedule, resource, effective_from)
        _refuse_implausible(event, max_rate, f"spot {resource}")
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


def _known_flavor(schedule: PriceSchedule, resource: str, effective_from: datetime) -> None:
    """Refuse a spot change for a resource the book in force does not price (a typo
    would otherwise record a price nothing ever reads)."""
    try:
        book = schedule.book_at(effective_from)
    except NoApplicableRate as exc:
        raise ValueError(f"spot {resource}: {exc}; publish a price book first") from None
    known = sorted(set(book.rates.public) | set(book.rates.spot))
    if resource not in known:
        raise ValueError(
            f"spot {resource}: price book {book.book_id!r} in force at "
            f"{effective_from.isoformat()} prices only {', '.join(known)}; "
            "pass --force to record it anyway"
        )


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
    limit: LimitOption = 100, cursor: CursorOption = None, fmt: str = FORMAT_OPTION
) -> None:
    """Published books and spot changes, in publication order, a page at a time
    (effective_from is cluster time, published_at store time)."""
    after = decode_cursor(cursor, int)[0] if cursor is not None else 0
    store = open_store()
    page = store.read_by_type(
        ["PriceBookPublished", "SpotPriceChanged"], after_position=after, limit=limit + 1
    )
    rows = []
    for record in page[:limit]:
        data = decode(record.envelope)
        assert isinstance(data, PriceBookPublished | SpotPriceChanged)
        rows.append(_summary(record, data))
    emit(rows, fmt)
    if len(page) > limit:
        print_next_cursor(encode_cursor([page[limit - 1].position]))


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
