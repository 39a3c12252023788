"""Price books and the effective-dated price schedule that rating reads.

A price book is a small YAML file an operator edits and publishes (see
``dlc_ledger/resources/pricebooks/``); it becomes a ``PriceBookPublished`` event, and spot
markets add ``SpotPriceChanged`` events. Rating never looks at files or "the
current price": it asks a :class:`PriceSchedule`, built from those events alone,
which rate applied at an instant, so replaying the events reproduces every bill.

Lookup rules (also in ``docs/billing.md``):

- the book in force at ``t`` is the one with the latest ``effective_from <= t``
  (for equal instants, the one published later in the event sequence);
- a per-model key (``gpu/A100-SXM4-80GB``) takes precedence over ``gpu/any``;
- a ``SpotPriceChanged`` sets the spot rate of one key from its ``effective_from``
  until the next change of that key or the next book (a change effective at
  the same instant as a book overrides that book's spot rate);
- idle = public times the book's ``idle_multiplier``; quota = 0;
- a service's or notebook's public (and idle) rate is its workload's own, from the book's
  ``workload_rates``, where that table prices the resource; else the jobs' rate. Spot is
  the market's price, the same for every workload.

One schedule holds one currency and scale: a line item must never add amounts
in two currencies, so a book or spot change in another currency is refused.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from ledger.canonical import parse_timestamp
from ledger.errors import Invalid, NotFound
from ledger.events import (
    BillingMode,
    NodeSpec,
    PriceBookPublished,
    PricedWorkload,
    Rates,
    SpotPriceChanged,
    SubscriptionPricesPublished,
)
from ledger.money import MAX_SCALE, exact_context

__all__ = [
    "DEFAULT_MAX_RATE",
    "GPU_ANY",
    "AppliedRate",
    "NoApplicableRate",
    "PriceBook",
    "PriceBookError",
    "PriceSchedule",
    "implausible_node_prices",
    "implausible_rates",
    "lookup_keys",
    "price_book_from_document",
]

GPU_ANY = "gpu/any"

#: Sanity bound on any rate, in currency units per unit-hour: a GPU-hour is the dearest
#: unit (a core-hour or a GiB-hour costs less), and no GPU rents for 1,000 a GPU-hour.
#: Publishing above it needs --force (settings: ``DLC_MAX_RATE``).
DEFAULT_MAX_RATE = Decimal(1000)

_DECIMAL_PATTERN = r"^[0-9]+(\.[0-9]+)?$"
_KEY_PATTERN = r"^(gpu/[A-Za-z0-9][A-Za-z0-9._-]*|cpu|memory)$"


class PriceBookError(Invalid):
    """A price book that cannot be published; the message names every bad field."""


class NoApplicableRate(NotFound):
    """No price book (or no rate for the resource key) is in force at the instant asked."""


# --- the YAML format --------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _rate_text(value: object, what: str = "value") -> str:
    # YAML turns an unquoted 2.40 into a float, which has already lost exactness.
    if isinstance(value, bool) or not isinstance(value, str):
        raise Invalid(
            f'{what} must be a quoted decimal string such as "2.40", '
            f"got {type(value).__name__} {value!r}"
        )
    return value


def _rate_table(value: object) -> object:
    if not isinstance(value, Mapping):
        raise Invalid("must be a mapping of resource key to rate")
    for key, rate in value.items():
        if not isinstance(key, str) or not re.match(_KEY_PATTERN, key):
            raise Invalid(f"unknown resource key {key!r}: use gpu/<model>, gpu/any, cpu or memory")
        text = _rate_text(rate, f"rate for {key!r}")
        if not re.match(_DECIMAL_PATTERN, text):
            raise Invalid(
                f'rate for {key!r} must be a non-negative decimal like "2.40", got {text!r}'
            )
    return value


class _RateTable(_Strict):
    public: dict[str, str] = Field(min_length=1)
    spot: dict[str, str] = {}

    @field_validator("public", "spot", mode="before")
    @classmethod
    def _check(cls, value: object) -> object:
        return _rate_table(value)


class _WorkloadRateTable(_Strict):
    """A service's or notebook's own public rates (spot is the market's, for all)."""

    public: dict[str, str] = Field(min_length=1)

    @field_validator("public", mode="before")
    @classmethod
    def _check(cls, value: object) -> object:
        return _rate_table(value)


class PriceBook(_Strict):
    """One price book as written in YAML (the demo's:
    ``dlc_ledger/resources/pricebooks/demo-2026.yaml``)."""

    id: str = Field(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    scale: StrictInt = Field(ge=0, le=MAX_SCALE)
    effective_from: datetime
    rates: _RateTable
    idle_multiplier: str = Field(pattern=_DECIMAL_PATTERN)
    #: services' and notebooks' own public rates, where they differ from the jobs'
    workload_rates: dict[PricedWorkload, _WorkloadRateTable] = {}
    #: node specs sold by subscription, with their monthly and yearly prices, as written
    #: (checked by :func:`ledger.subscriptions.specs.node_specs_from_document`); optional
    subscriptions: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _specs(self) -> PriceBook:
        self.node_specs()  # every problem of the section is a validation error
        return self

    def node_specs(self) -> dict[str, NodeSpec]:
        """The subscription section's node specs (empty: the book sells none)."""
        # imported here: ledger.subscriptions books through ledger.accounts, which rates
        # through this module
        from ledger.subscriptions.specs import node_specs_from_document

        if self.subscriptions is None:
            return {}
        return node_specs_from_document(self.subscriptions, self.scale)

    @field_validator("currency", mode="before")
    @classmethod
    def _currency(cls, value: object) -> object:
        if not (isinstance(value, str) and re.fullmatch(r"[A-Z]{3}", value)):
            raise Invalid(f"must be a 3-letter upper-case ISO 4217 code like USD, got {value!r}")
        return value

    @field_validator("idle_multiplier", mode="before")
    @classmethod
    def _multiplier_text(cls, value: object) -> str:
        return _rate_text(value, "idle_multiplier")

    @field_validator("effective_from", mode="before")
    @classmethod
    def _aware_instant(cls, value: object) -> datetime:
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise Invalid('must carry a UTC offset, e.g. "2026-01-01T00:00:00Z"')
            return value.astimezone(UTC)
        if not isinstance(value, str):
            raise Invalid("must be an ISO-8601 timestamp string with a UTC offset")
        try:
            return parse_timestamp(value)
        except ValueError as exc:
            raise Invalid(
                f"must be an ISO-8601 timestamp with a UTC offset, e.g. "
                f'"2026-01-01T00:00:00Z" ({exc})'
            ) from None

    def to_event(self) -> PriceBookPublished:
        """The ``PriceBookPublished`` payload that publishes this book."""
        return PriceBookPublished(
            book_id=self.id,
            currency=self.currency,
            scale=self.scale,
            effective_from=self.effective_from,
            rates=Rates(
                public={k: Decimal(v) for k, v in self.rates.public.items()},
                spot={k: Decimal(v) for k, v in self.rates.spot.items()},
            ),
            idle_multiplier=Decimal(self.idle_multiplier),
            workload_rates={
                workload: Rates(public={k: Decimal(v) for k, v in table.public.items()})
                for workload, table in self.workload_rates.items()
            },
        )

    def subscription_event(self) -> SubscriptionPricesPublished | None:
        """The ``SubscriptionPricesPublished`` of its subscription section (None: none)."""
        specs = self.node_specs()
        if not specs:
            return None
        return SubscriptionPricesPublished(
            book_id=self.id,
            currency=self.currency,
            scale=self.scale,
            effective_from=self.effective_from,
            specs=specs,
        )


def price_book_from_document(raw: Any, *, source: str = "<price book>") -> PriceBook:
    """Validate a parsed price book (YAML is read at the edge:
    :func:`dlc_ledger.services.yaml_files.parse_price_book`); every problem is a
    :class:`PriceBookError`."""
    if not isinstance(raw, dict):
        raise PriceBookError(f"{source}: a price book is a YAML mapping, got {type(raw).__name__}")
    try:
        return PriceBook.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "<root>"
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                msg = "unknown key (not part of the price book format)"
            problems.append(f"{loc}: {msg}")
        raise PriceBookError(f"{source}: invalid price book: " + "; ".join(problems)) from None


def implausible_rates(
    event: PriceBookPublished | SpotPriceChanged, bound: Decimal = DEFAULT_MAX_RATE
) -> list[str]:
    """The rates of ``event`` above ``bound`` (per unit-hour), one phrase each."""
    if isinstance(event, SpotPriceChanged):
        rates = [("spot", event.resource, event.rate)]
    else:
        tables = [("public", event.rates.public), ("spot", event.rates.spot)]
        tables += [
            (f"{workload} public", table.public)
            for workload, table in sorted(event.workload_rates.items())
        ]
        rates = [(mode, key, rate) for mode, table in tables for key, rate in sorted(table.items())]
    return [f"{mode} {key} {rate} {event.currency}/h" for mode, key, rate in rates if rate > bound]


#: Hours of the longest term of each unit (a 31-day month, a leap year).
_TERM_HOURS = {"monthly": 31 * 24, "yearly": 366 * 24}


def implausible_node_prices(
    event: SubscriptionPricesPublished, bound: Decimal = DEFAULT_MAX_RATE
) -> list[str]:
    """The node prices of ``event`` above what the node would cost at ``bound`` per
    GPU-hour (per node-hour for a node without GPUs) over the longest such term, one
    phrase each: the same sanity bound as the rates, per node-term."""
    out = []
    for name, node in sorted(event.specs.items()):
        for term, price in (("monthly", node.monthly), ("yearly", node.yearly)):
            ceiling = bound * max(node.gpus, 1) * _TERM_HOURS[term]
            if price > ceiling:
                out.append(
                    f"{name} {term} {price} {event.currency}/node (above {ceiling}: "
                    f"{max(node.gpus, 1)} x {bound} x {_TERM_HOURS[term]} h)"
                )
    return out


# --- the schedule -------------------------------------------------------------------


@dataclass(frozen=True)
class AppliedRate:
    """The rate in force for (resource, mode) at an instant, and where it came from."""

    rate: Decimal  # per unit-hour, in currency units
    book_id: str
    key: str  # the rate-table key that matched (e.g. gpu/any for a gpu/A100 resource)
    source: Literal["book", "spot-change", "idle", "quota"]
    since: datetime  # when this rate came into force
    #: whose table priced it: ``job`` (the book's ``rates``) or the workload's own
    table: str = "job"


def lookup_keys(resource: str) -> tuple[str, ...]:
    """Keys to try for ``resource``, most specific first (``gpu/<model>`` then ``gpu/any``)."""
    if resource.startswith("gpu/") and resource != GPU_ANY:
        return (resource, GPU_ANY)
    return (resource,)


@dataclass(frozen=True)
class _Book:
    at: datetime
    book: PriceBookPublished


@dataclass(frozen=True)
class _Spot:
    at: datetime
    rate: Decimal


class PriceSchedule:
    """Effective-dated rates from a sequence of ``PriceBookPublished`` / ``SpotPriceChanged``."""

    def __init__(self, events: Iterable[PriceBookPublished | SpotPriceChanged] = ()) -> None:
        books: list[_Book] = []
        spots: dict[str, list[_Spot]] = {}
        spot_events: list[SpotPriceChanged] = []
        for event in events:
            if isinstance(event, PriceBookPublished):
                books.append(_Book(event.effective_from.astimezone(UTC), event))
            elif isinstance(event, SpotPriceChanged):
                spot_events.append(event)
            else:  # pragma: no cover - guarded by the type
                raise TypeError(f"not a price event: {type(event).__name__}")
        books.sort(key=lambda b: b.at)  # stable: later-published wins among equal instants
        self._books = tuple(books)
        self._book_times = [b.at for b in books]
        self.currency: str | None = books[0].book.currency if books else None
        self.scale: int | None = books[0].book.scale if books else None
        for b in books:
            if (b.book.currency, b.book.scale) != (self.currency, self.scale):
                raise PriceBookError(
                    f"price book {b.book.book_id!r} is in {b.book.currency} scale {b.book.scale}, "
                    f"but the schedule is in {self.currency} scale {self.scale}"
                )
        for s in spot_events:
            if self.currency is not None and s.currency != self.currency:
                raise PriceBookError(
                    f"spot price change for {s.resource!r} is in {s.currency}, "
                    f"but the schedule is in {self.currency}"
                )
            spots.setdefault(s.resource, []).append(_Spot(s.effective_from.astimezone(UTC), s.rate))
        for changes in spots.values():
            changes.sort(key=lambda c: c.at)
        self._spots = spots
        self._spot_times = {k: [c.at for c in v] for k, v in spots.items()}

    @property
    def books(self) -> tuple[PriceBookPublished, ...]:
        return tuple(b.book for b in self._books)

    def _book_index(self, t: datetime) -> int:
        i = bisect.bisect_right(self._book_times, t) - 1
        if i < 0:
            raise NoApplicableRate(f"no price book in force at {t.isoformat()}")
        return i

    def book_at(self, t: datetime) -> PriceBookPublished:
        """The price book in force at ``t``."""
        return self._books[self._book_index(_utc(t))].book

    def _spot_override(self, key: str, t: datetime, book_at: datetime) -> _Spot | None:
        times = self._spot_times.get(key)
        if not times:
            return None
        i = bisect.bisect_right(times, t) - 1
        if i < 0:
            return None
        change = self._spots[key][i]
        return change if change.at >= book_at else None

    def rate_at(
        self, resource: str, mode: BillingMode, t: datetime, workload: str = "training"
    ) -> AppliedRate:
        """The rate per unit-hour for ``resource`` in billing ``mode`` at instant ``t``, for
        a ``workload`` (``training``, ``service``, ``notebook``: the book's own rates of a
        service or notebook apply to it where it has them)."""
        t = _utc(t)
        if mode == "quota":  # prepaid: zero whatever the books say, even before the first one
            i = bisect.bisect_right(self._book_times, t) - 1
            book_id = self._books[i].book.book_id if i >= 0 else ""
            return AppliedRate(Decimal(0), book_id, resource, "quota", t)
        entry = self._books[self._book_index(t)]
        book = entry.book
        if mode == "spot":
            for key in lookup_keys(resource):
                override = self._spot_override(key, t, entry.at)
                if override is not None:
                    return AppliedRate(override.rate, book.book_id, key, "spot-change", override.at)
                if key in book.rates.spot:
                    return AppliedRate(book.rates.spot[key], book.book_id, key, "book", entry.at)
            raise NoApplicableRate(
                f"price book {book.book_id!r} has no spot rate for {resource!r} "
                f"(tried {', '.join(lookup_keys(resource))}) at {t.isoformat()}"
            )
        own = next((r for w, r in book.workload_rates.items() if w == workload), None)
        tables = [(workload, own.public)] if own is not None else []
        for table, rates in [*tables, ("job", book.rates.public)]:
            for key in lookup_keys(resource):
                if key in rates:
                    public = rates[key]
                    if mode == "idle":
                        with exact_context():
                            rate = public * book.idle_multiplier
                        return AppliedRate(rate, book.book_id, key, "idle", entry.at, table)
                    return AppliedRate(public, book.book_id, key, "book", entry.at, table)
        raise NoApplicableRate(
            f"price book {book.book_id!r} has no public rate for {resource!r} "
            f"(tried {', '.join(lookup_keys(resource))}) at {t.isoformat()}"
        )

    def change_points(
        self,
        start: datetime,
        end: datetime,
        resource: str | None = None,
        mode: BillingMode | None = None,
    ) -> tuple[datetime, ...]:
        """Sorted instants in ``[start, end)`` where an applicable rate may change.

        Without ``resource``/``mode`` every book and spot change counts. With
        them, only what can move that rate: books (except for quota mode, which
        is always zero) and, in spot mode, spot changes of the keys the resource
        looks up. A point at ``start`` itself splits nothing.
        """
        start, end = _utc(start), _utc(end)
        if mode == "quota":
            return ()
        points = {t for t in self._book_times if start <= t < end}
        if mode is None or mode == "spot":
            keys = self._spot_times.keys() if resource is None else lookup_keys(resource)
            for key in keys:
                points.update(t for t in self._spot_times.get(key, ()) if start <= t < end)
        return tuple(sorted(points))


def _utc(t: datetime) -> datetime:
    if t.tzinfo is None:
        raise Invalid(f"naive datetime {t!r}: instants must be timezone-aware")
    return t.astimezone(UTC)
