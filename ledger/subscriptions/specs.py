"""The subscription section of a price book: node specs and their monthly and yearly prices.

A price book's YAML may hold ``subscriptions:`` (docs/subscriptions.md); publishing it
appends a ``SubscriptionPricesPublished`` beside the book's ``PriceBookPublished``. The
spec in force at an instant is the one of the latest section effective by then (later
published wins among equal instants), and its price is locked into each term ordered.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from ledger.errors import Invalid, NotFound
from ledger.events import NodeSpec, SlaCommitment, SubscriptionPricesPublished
from ledger.events.subscriptions import MAX_SLA_GRACE_MINUTES

__all__ = ["SpecSchedule", "UnknownSpec", "node_specs_from_document"]

_PRICE = re.compile(r"^[0-9]+(\.[0-9]+)?$")
_SPEC_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_FIELDS = {"flavor", "gpus", "cpu", "memory_gib", "monthly", "yearly", "sla"}


class UnknownSpec(NotFound):
    """No node spec of that name is sold at the instant asked."""


def _price(name: str, key: str, value: object, scale: int) -> Decimal:
    if not isinstance(value, str) or not _PRICE.match(value):
        raise Invalid(
            f'subscriptions.{name}.{key}: a quoted non-negative decimal such as "9000.00", '
            f"got {value!r}"
        )
    price = Decimal(value)
    if -price.as_tuple().exponent > scale:  # type: ignore[operator]
        raise Invalid(f"subscriptions.{name}.{key}: {value} has more decimals than scale {scale}")
    return price


def _whole(name: str, key: str, value: object, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise Invalid(f"subscriptions.{name}.{key}: a whole number >= {low}, got {value!r}")
    return value


def _sla(name: str, value: object) -> SlaCommitment:
    """``sla: {grace_minutes: N}``: the spec's delivery commitment."""
    if not isinstance(value, Mapping) or set(value) != {"grace_minutes"}:
        raise Invalid(f"subscriptions.{name}.sla: a mapping {{grace_minutes: N}}, got {value!r}")
    grace = _whole(name, "sla.grace_minutes", value["grace_minutes"])
    if grace > MAX_SLA_GRACE_MINUTES:
        raise Invalid(
            f"subscriptions.{name}.sla.grace_minutes: at most {MAX_SLA_GRACE_MINUTES} "
            f"(a week), got {grace}"
        )
    return SlaCommitment(grace_minutes=grace)


def node_specs_from_document(raw: Any, scale: int) -> dict[str, NodeSpec]:
    """The node specs of a price book's ``subscriptions:`` mapping (every problem raises)."""
    if not isinstance(raw, Mapping) or not raw:
        raise Invalid("subscriptions: a mapping of node spec name to its resources and prices")
    specs: dict[str, NodeSpec] = {}
    for name, body in raw.items():
        if not isinstance(name, str) or not _SPEC_NAME.match(name):
            raise Invalid(f"subscriptions: bad node spec name {name!r}")
        if not isinstance(body, Mapping):
            raise Invalid(f"subscriptions.{name}: a mapping of {', '.join(sorted(_FIELDS))}")
        unknown = set(body) - _FIELDS
        if unknown:
            raise Invalid(f"subscriptions.{name}: unknown key(s) {', '.join(sorted(unknown))}")
        missing = {"gpus", "cpu", "memory_gib", "monthly", "yearly"} - set(body)
        if missing:
            raise Invalid(f"subscriptions.{name}: missing {', '.join(sorted(missing))}")
        flavor = body.get("flavor", "gpu/any")
        if not isinstance(flavor, str) or not re.match(r"^gpu/[A-Za-z0-9][A-Za-z0-9._-]*$", flavor):
            raise Invalid(f"subscriptions.{name}.flavor: gpu/<model> or gpu/any, got {flavor!r}")
        specs[name] = NodeSpec(
            flavor=flavor,
            gpus=_whole(name, "gpus", body["gpus"]),
            cpu_milli=_whole(name, "cpu", body["cpu"], 1) * 1000,
            memory_mib=_whole(name, "memory_gib", body["memory_gib"], 1) * 1024,
            monthly=_price(name, "monthly", body["monthly"], scale),
            yearly=_price(name, "yearly", body["yearly"], scale),
            sla=_sla(name, body["sla"]) if "sla" in body else None,
        )
    return specs


class SpecSchedule:
    """Effective-dated node specs from ``SubscriptionPricesPublished`` events."""

    def __init__(self, events: Iterable[SubscriptionPricesPublished] = ()) -> None:
        ordered = sorted(events, key=lambda e: e.effective_from)  # stable: later wins
        self._events = tuple(ordered)
        self._times = [e.effective_from for e in ordered]

    @property
    def sections(self) -> tuple[SubscriptionPricesPublished, ...]:
        return self._events

    def section_at(self, t: datetime) -> SubscriptionPricesPublished:
        i = bisect.bisect_right(self._times, t) - 1
        if i < 0:
            raise UnknownSpec(
                f"no price book with a subscriptions section is in force at {t.isoformat()}"
            )
        return self._events[i]

    def sla_of(self, name: str, book_id: str, ordered_at: datetime) -> SlaCommitment | None:
        """The delivery commitment of spec ``name`` in the book a term was priced from
        (``book_id``, in force at ``ordered_at``): locked with the term's price."""
        found: SlaCommitment | None = None
        for section in self._events:
            if section.effective_from > ordered_at:
                break
            if section.book_id == book_id and name in section.specs:
                found = section.specs[name].sla
        return found

    def spec_at(self, name: str, t: datetime) -> tuple[SubscriptionPricesPublished, NodeSpec]:
        """The section in force at ``t`` and its spec ``name`` (unknown: the known listed)."""
        section = self.section_at(t)
        spec = section.specs.get(name)
        if spec is None:
            known = ", ".join(sorted(section.specs)) or "none"
            raise UnknownSpec(
                f"unknown node spec {name!r} in price book {section.book_id!r} "
                f"(sold at {t.isoformat()}: {known})"
            )
        return section, spec
