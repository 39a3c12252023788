"""Publishing price books and spot prices: validated, content-addressed, appended once."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from ledger.applies import content_digest
from ledger.bounds import check_bounds
from ledger.catalogue import decode
from ledger.envelopes import make_envelope
from ledger.errors import Invalid
from ledger.events import PriceBookPublished, SpotPriceChanged, SubscriptionPricesPublished
from ledger.ids import deterministic_id
from ledger.prices import (
    DEFAULT_MAX_RATE,
    NoApplicableRate,
    PriceBook,
    PriceSchedule,
    implausible_node_prices,
    implausible_rates,
)
from ledger.store.base import EventStore, read_all_of_types

__all__ = [
    "SOURCE",
    "PublishResult",
    "all_price_events",
    "publish_price_book",
    "publish_spot_price",
]


SOURCE = "api/prices-cli"
_KEY = re.compile(r"^(gpu/[A-Za-z0-9][A-Za-z0-9._-]*|cpu|memory)$")


@dataclass(frozen=True)
class PublishResult:
    stream: str
    event_id: str
    added: bool  # False: the same content was already published (or a dry run)
    dry_run: bool = False


def _content_id(
    kind: str, event: PriceBookPublished | SpotPriceChanged | SubscriptionPricesPublished
) -> UUID:
    return deterministic_id("price", kind, content_digest(event))


def all_price_events(
    store: EventStore,
) -> list[tuple[Any, PriceBookPublished | SpotPriceChanged]]:
    """Every price event in publication order, with its record."""
    out: list[tuple[Any, PriceBookPublished | SpotPriceChanged]] = []
    for record in read_all_of_types(store, ["PriceBookPublished", "SpotPriceChanged"]):
        data = decode(record.envelope)
        assert isinstance(data, PriceBookPublished | SpotPriceChanged)
        out.append((record, data))
    return out


def _refuse_implausible(
    event: PriceBookPublished | SpotPriceChanged,
    bound: Decimal | None,
    what: str,
    section: SubscriptionPricesPublished | None = None,
) -> None:
    if bound is None:
        return
    high = implausible_rates(event, bound)
    if section is not None:
        high += implausible_node_prices(section, bound)
    if high:
        raise Invalid(
            f"{what}: {', '.join(high)} above the sanity bound of {bound} per unit-hour "
            "(DLC_MAX_RATE); check the file, or pass --force if the rate is meant"
        )


def publish_price_book(
    store: EventStore,
    book: PriceBook,
    *,
    at: datetime | None = None,
    force: bool = False,
    max_rate: Decimal | None = DEFAULT_MAX_RATE,
    dry_run: bool = False,
) -> PublishResult:
    """Append ``book`` as ``PriceBookPublished`` unless that exact book is already there.

    Unless ``force``: a book taking effect at the same instant as another published
    book (which it would silently override), with a rate above ``max_rate`` per
    unit-hour or a node price above ``max_rate`` per GPU-hour over its term is refused.
    Whatever ``force`` says, a price beyond the bounds of a fact (``ledger/bounds.py``:
    ``OutOfBounds``, naming the field) is refused, a dry run included (a book already
    published as it is stays a no-op). ``at`` is the publication's cluster time (default
    now).
    """
    event = book.to_event()
    section = book.subscription_event()
    stream = f"pricebook/{book.id}"
    event_id = _content_id("book", event)
    section_id = None if section is None else _content_id("subscriptions", section)
    existing = store.read_stream(stream)
    stored = {record.event_id for record in existing}
    if event_id in stored and (section_id is None or section_id in stored):
        return PublishResult(stream, str(event_id), added=False)
    # a new fact's bounds, which --force does not lift (make_envelope checks them again)
    for fact in (event, section):
        if fact is not None:
            check_bounds(fact, f"{fact.type_name}: ")
    if event_id not in stored:
        _check_new_book(store, book, event, section, existing, force=force, max_rate=max_rate)
    if dry_run:
        return PublishResult(stream, str(event_id), added=False, dry_run=True)
    now = at or datetime.now(UTC)
    envelopes = []
    if event_id not in stored:
        envelopes.append(
            make_envelope(
                event,
                event_id=event_id,
                stream=stream,
                occurred_at=now,
                observed_at=now,
                source=SOURCE,
            )
        )
    if section is not None and section_id is not None and section_id not in stored:
        envelopes.append(
            make_envelope(
                section,
                event_id=section_id,
                stream=stream,
                occurred_at=now,
                observed_at=now,
                source=SOURCE,
            )
        )
    result = store.append(envelopes, expected_versions={stream: len(existing)})
    return PublishResult(stream, str(envelopes[0].event_id), added=bool(result.positions))


def _check_new_book(
    store: EventStore,
    book: PriceBook,
    event: PriceBookPublished,
    section: SubscriptionPricesPublished | None,
    existing: list[Any],
    *,
    force: bool,
    max_rate: Decimal | None,
) -> None:
    for record in existing:
        other = decode(record.envelope)
        if isinstance(other, PriceBookPublished) and other.effective_from == event.effective_from:
            raise Invalid(
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
            raise Invalid(
                f"price book {book.id!r} takes effect at {event.effective_from.isoformat()}, "
                f"the same instant as published book(s) {', '.join(same)}, which it would "
                "silently override; choose another effective_from, or pass --force"
            )
        _refuse_implausible(event, max_rate, f"price book {book.id!r}", section)
    # refuses a second currency or scale (a line item must never mix them)
    PriceSchedule([*published, event])


def publish_spot_price(
    store: EventStore,
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
        raise Invalid(f"unknown resource key {resource!r}: use gpu/<model>, gpu/any, cpu, memory")
    if rate < 0:
        raise Invalid(f"a spot rate cannot be negative, got {rate}")
    events = [e for _, e in all_price_events(store)]
    books = [e for e in events if isinstance(e, PriceBookPublished)]
    if currency is None:
        if not books:
            raise Invalid("no price book published yet: pass --currency or publish a book")
        currency = books[0].currency
    event = SpotPriceChanged(
        resource=resource, currency=currency, rate=rate, effective_from=effective_from
    )
    schedule = PriceSchedule([*events, event])  # same currency as the books
    if not force:
        _known_flavor(schedule, resource, effective_from)
        _refuse_implausible(event, max_rate, f"spot {resource}")
    stream = f"pricebook/spot/{resource}"
    event_id = _content_id("spot", event)
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
        raise Invalid(f"spot {resource}: {exc}; publish a price book first") from None
    known = sorted(set(book.rates.public) | set(book.rates.spot))
    if resource not in known:
        raise Invalid(
            f"spot {resource}: price book {book.book_id!r} in force at "
            f"{effective_from.isoformat()} prices only {', '.join(known)}; "
            "pass --force to record it anyway"
        )
