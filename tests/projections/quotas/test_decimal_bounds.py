"""Decimals of the catalogue have bounds too (docs/wire-format.md, Bounds): prices, rates,
the idle multiplier, the fair-sharing weight, a rating's quantity and rate.

Before them a price of 10^20 a node-month (published with ``--force``, past the
plausibility check) was a fact: its renewal's amount broke the amount's bound at every
tick, and a rate that large posted amounts no invoice could carry. A new fact beyond a
bound is refused naming the field; stored ones stay readable.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import orjson
import pytest

from dlc_ledger.services.billing import publish_price_book
from ledger.bounds import (
    MAX_CPU_MILLI,
    MAX_DECIMAL_PLACES,
    MAX_INT,
    MAX_MEMORY_MIB,
    MAX_MGPU,
    MAX_NODE_PRICE_MINOR,
    MAX_RATE_MINOR,
    MAX_RATED_QUANTITY,
    MAX_SUBSCRIBED_NODES,
    USAGE_MONTH_US,
    OutOfBounds,
    check_bounds,
)
from ledger.catalogue import decode, envelope_from_wire
from ledger.envelopes import Envelope, EventData, OutOfBoundsEvent, make_envelope
from ledger.errors import Invalid
from ledger.events import (
    LedgerTransactionPosted,
    NodeSpec,
    Posting,
    PriceBookPublished,
    QuotaCreated,
    QuotaSpec,
    RatedUsage,
    Rates,
    SpotPriceChanged,
    SubscriptionCharge,
    SubscriptionPricesPublished,
    SubscriptionPurchased,
    SubscriptionTerm,
)
from ledger.prices import PriceBook
from ledger.rating import MICROS_PER_HOUR, RESOURCE_UNITS
from ledger.store.postgres import PostgresEventStore
from tests.support.billing import demo_book

T0 = datetime(2026, 11, 1, tzinfo=UTC)
T1 = datetime(2026, 12, 1, tzinfo=UTC)


def _node(**kw: Any) -> NodeSpec:
    fields: dict[str, Any] = {
        "gpus": 8, "cpu_milli": 96_000, "memory_mib": 1_048_576,
        "monthly": Decimal("20000"), "yearly": Decimal("200000"),
    }  # fmt: skip
    return NodeSpec(**{**fields, **kw})


def _term(**kw: Any) -> SubscriptionTerm:
    fields: dict[str, Any] = {
        "term": 1, "unit": "month", "starts_at": T0, "ends_at": T1,
        "unit_price": Decimal("20000"), "monthly_price": Decimal("20000"),
        "yearly_price": Decimal("200000"), "amount_minor": 2_000_000, "book_id": "b1",
        "ordered_at": T0,
    }  # fmt: skip
    return SubscriptionTerm(**{**fields, **kw})


def _usage(**kw: Any) -> RatedUsage:
    fields: dict[str, Any] = {
        "occupancy_id": "p1", "job_uid": "j1", "workspace": "ws-a", "resource": "gpu/any",
        "billing_mode": "public", "usage_period": "2026-11", "unit": "GPU-hour",
        "usage": 3_600_000_000_000, "quantity": Decimal(1), "as_of": T1, "rate": Decimal("2.4"),
    }  # fmt: skip
    return RatedUsage(**{**fields, **kw})


def _charge(**kw: Any) -> SubscriptionCharge:
    fields: dict[str, Any] = {
        "subscription_id": "s1", "term": 1, "kind": "purchase", "workspace": "ws-a",
        "group": "g", "spec": "n8", "nodes": 1, "unit": "month",
        "unit_price": Decimal("20000"), "starts_at": T0, "ends_at": T1,
    }  # fmt: skip
    return SubscriptionCharge(**{**fields, **kw})


def _txn(**kw: Any) -> LedgerTransactionPosted:
    return LedgerTransactionPosted(
        transaction_id="t1",
        postings=(
            Posting(account="receivable/ws-a", amount_minor=Decimal(240), currency="USD"),
            Posting(account="revenue/public/gpu", amount_minor=Decimal(-240), currency="USD"),
        ),
        period="2026-11",
        **kw,
    )


def _book(scale: int = 2, **kw: Any) -> PriceBookPublished:
    fields: dict[str, Any] = {
        "book_id": "b1", "currency": "USD", "scale": scale, "effective_from": T0,
        "rates": Rates(public={"gpu/any": Decimal("2.40")}), "idle_multiplier": Decimal("0.3"),
    }  # fmt: skip
    return PriceBookPublished(**{**fields, **kw})


def _prices(scale: int = 2, **node: Any) -> SubscriptionPricesPublished:
    return SubscriptionPricesPublished(
        book_id="b1", currency="USD", scale=scale, effective_from=T0, specs={"n8": _node(**node)}
    )


def _purchase(scale: int = 2, **term: Any) -> SubscriptionPurchased:
    node = _node(yearly=Decimal(90_000))  # within the bound at any scale
    first = _term(**{"yearly_price": node.yearly, **term})
    return SubscriptionPurchased(
        subscription_id="s1", group="g", spec="n8", nodes=1, workspace="ws-a",
        currency="USD", scale=scale, node=node, first=first,
    )  # fmt: skip


def _new(data: EventData) -> Envelope:
    return make_envelope(
        data, event_id=uuid.uuid4(), stream="test/x", occurred_at=T0, observed_at=T0,
        source="test",
    )  # fmt: skip


HUGE = Decimal(10) ** 20

#: (what, a fact with the field beyond its bound, the field as the refusal names it)
BEYOND: list[tuple[str, EventData, str]] = [
    ("node monthly", _prices(monthly=HUGE), "specs['n8'].monthly"),
    ("node yearly", _prices(yearly=HUGE), "specs['n8'].yearly"),
    ("term unit price", _purchase(unit_price=HUGE), "first.unit_price"),
    ("term monthly price", _purchase(monthly_price=HUGE), "first.monthly_price"),
    ("term yearly price", _purchase(yearly_price=HUGE), "first.yearly_price"),
    ("charge unit price", _txn(charge=_charge(unit_price=HUGE)), "charge.unit_price"),
    ("public rate", _book(rates=Rates(public={"gpu/any": HUGE})), "rates.public['gpu/any']"),
    ("spot rate", _book(rates=Rates(spot={"cpu": HUGE})), "rates.spot['cpu']"),
    ("idle multiplier", _book(idle_multiplier=Decimal(11)), "idle_multiplier"),
    (
        "spot price",
        SpotPriceChanged(resource="gpu/any", currency="USD", rate=HUGE, effective_from=T0),
        "rate",
    ),
    (
        "fair-sharing weight",
        QuotaCreated(spec=QuotaSpec(quota_id="q", fair_sharing_weight=Decimal(10**7))),
        "spec.fair_sharing_weight",
    ),
    ("rated quantity", _txn(usage=_usage(quantity=HUGE)), "usage.quantity"),
    ("rated quantity, negative", _txn(usage=_usage(quantity=-HUGE)), "usage.quantity"),
    ("rated rate", _txn(usage=_usage(rate=HUGE)), "usage.rate"),
    (
        "posting amount (any other decimal)",
        LedgerTransactionPosted(
            transaction_id="t1",
            postings=(
                Posting(account="receivable/ws-a", amount_minor=HUGE, currency="USD"),
                Posting(account="revenue/x", amount_minor=-HUGE, currency="USD"),
            ),
        ),
        "postings[0].amount_minor",
    ),
]


@pytest.mark.parametrize(("data", "field"), [b[1:] for b in BEYOND], ids=[b[0] for b in BEYOND])
def test_a_decimal_beyond_its_bound_is_refused_naming_the_field(
    data: EventData, field: str
) -> None:
    with pytest.raises(OutOfBounds) as refused:
        _new(data)
    assert f"{data.type_name}: {field}: " in str(refused.value)
    assert isinstance(refused.value, Invalid)  # a refusal of the request: exit 1, HTTP 400


def test_within_their_bounds_the_facts_are_accepted() -> None:
    for data in (_prices(), _purchase(), _txn(charge=_charge()), _book(), _txn(usage=_usage())):
        _new(data)
    _new(QuotaCreated(spec=QuotaSpec(quota_id="q", fair_sharing_weight=Decimal(10**6))))
    _new(_book(idle_multiplier=Decimal(10)))
    _new(_txn(usage=_usage(quantity=Decimal(-MAX_RATED_QUANTITY))))  # a reversal


def test_a_price_bound_is_in_minor_units_at_the_facts_scale() -> None:
    """nodes x price x 10^scale stays a JSON-safe integer of minor units."""
    at_2 = Decimal(MAX_NODE_PRICE_MINOR).scaleb(-2)  # 900,719,925.47
    _new(_prices(scale=2, monthly=at_2))
    with pytest.raises(OutOfBounds, match=r"monthly: 900719925\.48 is outside .* at scale 2"):
        _new(_prices(scale=2, monthly=at_2 + Decimal("0.01")))
    at_6 = Decimal(MAX_NODE_PRICE_MINOR).scaleb(-6)  # 90,071.992547
    _new(_purchase(scale=6, unit_price=at_6))
    with pytest.raises(OutOfBounds, match=r"first\.unit_price"):
        _new(_purchase(scale=6, unit_price=at_6 + Decimal("0.000001")))
    # a yen price (scale 0) may be far higher than a dollar one
    _new(_prices(scale=0, monthly=Decimal(5_000_000), yearly=Decimal(50_000_000)))
    rate_6 = Decimal(MAX_RATE_MINOR).scaleb(-6)
    _new(_book(scale=6, rates=Rates(public={"gpu/any": rate_6})))
    with pytest.raises(OutOfBounds, match=r"rates.public\['gpu/any'\]"):
        _new(_book(scale=6, rates=Rates(public={"gpu/any": rate_6 + Decimal("0.000001")})))


def test_every_decimal_is_finite_and_short() -> None:
    long = Decimal(1).scaleb(-(MAX_DECIMAL_PLACES + 1))
    with pytest.raises(OutOfBounds, match=f"idle_multiplier: {MAX_DECIMAL_PLACES + 1} decimal"):
        _new(_book(idle_multiplier=long))
    with pytest.raises(OutOfBounds, match=r"usage\.quantity: NaN is not a finite number"):
        check_bounds(_txn(usage=_usage()).model_copy(update={"usage": _usage().model_copy(
            update={"quantity": Decimal("NaN")})}))  # fmt: skip


def test_the_worst_cases_of_the_decimal_bounds() -> None:
    """The arithmetic behind docs/wire-format.md (Bounds)."""
    # an order of the most nodes at the dearest price, in minor units at any scale
    assert MAX_SUBSCRIBED_NODES * MAX_NODE_PRICE_MINOR <= MAX_INT
    assert SubscriptionPurchased.model_fields["nodes"].metadata[-1].le == MAX_SUBSCRIBED_NODES
    # a rating transaction of the most units at the dearest rate
    assert MAX_RATED_QUANTITY * MAX_RATE_MINOR <= MAX_INT
    # the most units a rating transaction holds: int64 usage over the smallest unit
    smallest = min(u.per_unit for u in RESOURCE_UNITS.values())
    assert (2**63 - 1) / (smallest * MICROS_PER_HOUR) <= MAX_RATED_QUANTITY
    # one pod's longest month at its bounds, in each unit
    for kind, per_pod in (("gpu", MAX_MGPU), ("cpu", MAX_CPU_MILLI), ("memory", MAX_MEMORY_MIB)):
        per_unit = RESOURCE_UNITS[kind].per_unit
        assert per_pod * USAGE_MONTH_US / (per_unit * MICROS_PER_HOUR) <= MAX_RATED_QUANTITY


def test_stored_decimals_beyond_the_bounds_stay_readable_but_are_not_new_facts() -> None:
    fat = _prices(monthly=HUGE)
    stored = Envelope(
        event_id=uuid.uuid4(), type=fat.type_name, schema_version=fat.schema_version,
        stream="pricebook/b1", occurred_at=T0, observed_at=T0, source="test",
        data=fat.model_dump(mode="json"),
    )  # fmt: skip
    read = decode(stored)  # reading never checks bounds
    assert isinstance(read, SubscriptionPricesPublished) and read.specs["n8"].monthly == HUGE
    with pytest.raises(OutOfBoundsEvent, match="monthly"):  # ingest: a new fact
        envelope_from_wire(orjson.dumps(stored.to_wire()))


def _fat(book: PriceBook, monthly: str) -> PriceBook:
    assert book.subscriptions is not None
    specs = dict(book.subscriptions)
    name = sorted(specs)[0]
    specs[name] = {**specs[name], "monthly": monthly}
    return book.model_copy(update={"id": "fat", "subscriptions": specs})


def test_publishing_refuses_a_price_beyond_its_bound_even_forced(
    store: PostgresEventStore,
) -> None:
    fat = _fat(demo_book(), "100000000000000000000")
    for dry_run in (True, False):
        with pytest.raises(OutOfBounds, match=r"SubscriptionPricesPublished: specs\[.*\]\.monthly"):
            publish_price_book(store, fat, at=T0, force=True, dry_run=dry_run)
    assert store.read_stream("pricebook/fat") == []


def test_publishing_checks_node_prices_against_the_plausible_rate(
    store: PostgresEventStore,
) -> None:
    """A node-month dearer than its GPUs at DLC_MAX_RATE (1,000 a GPU-hour) for 31 days
    needs --force, as a rate above it does; within the bounds, --force lets it through."""
    book = demo_book()
    assert book.subscriptions is not None
    name = sorted(book.subscriptions)[0]
    gpus = int(book.subscriptions[name]["gpus"])
    ceiling = 1000 * max(gpus, 1) * 744
    with pytest.raises(Invalid, match=f"{name} monthly {ceiling + 1} USD/node"):
        publish_price_book(store, _fat(book, str(ceiling + 1)), at=T0)
    assert publish_price_book(store, _fat(book, str(ceiling)), at=T0).added
    forced = _fat(book, str(ceiling + 1)).model_copy(update={"id": "fat-2"})
    assert publish_price_book(store, forced, at=T1, force=True).added
