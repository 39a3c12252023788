"""SLA credits as properties: random cordons, uncordons, removals and re-registrations of
a group's nodes against one or two subscriptions of it.

The reference is independent of the product's sweep: the term is cut into 5-minute slots
(every fact falls on a slot boundary), each slot's delivered nodes are counted by
replaying the facts node by node, the shortfall's levels are walked slot by slot for
runs at least the grace long, and the counted shortfall is handed to the latest purchase
first. The credit must equal the counted node-time x the term's node-hour price
(rounded half-even once, exact with Fraction), never negative, never above the term's
price.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.envelopes import EventData
from ledger.events import (
    NodeCordoned,
    NodeRegistered,
    NodeRemoved,
    NodeSpec,
    SlaCommitment,
    SubscriptionPricesPublished,
    SubscriptionPurchased,
)
from ledger.money import to_minor
from ledger.subscriptions import SpecSchedule, fold_subscriptions
from ledger.subscriptions.orders import order_term
from ledger.subscriptions.sla import credit_minor, node_states, term_deliveries

SLOT = timedelta(minutes=5)
START = datetime(2027, 1, 1, tzinfo=UTC)  # a 31-day month: 8,928 slots
SLOTS = 31 * 24 * 12
GROUP = "grp"
SPEC = "ml.test"

actions = st.sampled_from(["register", "cordon", "uncordon", "remove"])
#: a node's facts: (slot, action), slots around the term (before it, in it, past it), many
#: close together (at its start and its end) so that short blips and runs just the
#: grace long are common
slots = st.one_of(
    st.integers(-20, SLOTS + 40), st.integers(-2, 30), st.integers(SLOTS - 15, SLOTS + 15)
)
node_facts = st.lists(st.tuples(slots, actions), max_size=8)


def _schedule(monthly: Decimal, grace: int) -> SpecSchedule:
    node = NodeSpec(
        gpus=8,
        cpu_milli=8000,
        memory_mib=65536,
        monthly=monthly,
        yearly=monthly * 10,
        sla=SlaCommitment(grace_minutes=grace),
    )
    section = SubscriptionPricesPublished(
        book_id="book",
        currency="USD",
        scale=2,
        effective_from=datetime(2020, 1, 1, tzinfo=UTC),
        specs={SPEC: node},
    )
    return SpecSchedule([section])


def _facts(nodes: list[list[tuple[int, str]]]) -> list[tuple[int, int, str]]:
    """Every fact as (slot, node, action), in the order the store would hold them."""
    out = [(slot, i, a) for i, facts in enumerate(nodes) for slot, a in facts]
    return sorted(out, key=lambda f: f[0])  # stable: a node's same-slot facts keep order


def _event(node: int, action: str) -> EventData:
    name = f"n{node}"
    if action == "register":
        return NodeRegistered(
            node=name, resource_group=GROUP, gpus=8, cpu_milli=8000, memory_mib=65536
        )
    if action == "remove":
        return NodeRemoved(node=name)
    return NodeCordoned(node=name, cordoned=action == "cordon")


def _delivered_per_slot(facts: list[tuple[int, int, str]], count: int, end: int) -> list[int]:
    # per node: None (never registered), "up", "cordoned", "removed"
    state: list[str | None] = [None] * count
    by_slot: dict[int, list[tuple[int, str]]] = {}
    for slot, node, action in facts:
        by_slot.setdefault(max(slot, -20), []).append((node, action))
    out = []
    for slot in range(-20, end):
        for node, action in by_slot.get(slot, []):
            s = state[node]
            if action == "register":
                if s is None or s == "removed":
                    state[node] = "up"
            elif s in (None, "removed"):
                continue
            elif action == "cordon":
                state[node] = "cordoned"
            elif action == "uncordon":
                state[node] = "up"
            else:
                state[node] = "removed"
        if slot >= 0:
            out.append(sum(1 for s in state if s == "up"))
    return out


def _counted(short: list[int], grace_slots: int) -> list[int]:
    counted = [0] * len(short)
    for level in range(1, max(short, default=0) + 1):
        i = 0
        while i < len(short):
            if short[i] < level:
                i += 1
                continue
            j = i
            while j < len(short) and short[j] >= level:
                j += 1
            if j - i >= grace_slots:
                for k in range(i, j):
                    counted[k] = max(counted[k], level)
            i = j
    return counted


@settings(max_examples=200, deadline=None)
@given(
    nodes=st.lists(node_facts, max_size=5),
    bought=st.lists(st.integers(1, 4), min_size=1, max_size=2),
    grace=st.sampled_from([0, 5, 15, 60]),
    cents=st.integers(0, 10_000_000),
)
def test_the_credit_is_the_undelivered_node_hours_at_the_node_hour_price(
    nodes: list[list[tuple[int, str]]], bought: list[int], grace: int, cents: int
) -> None:
    monthly = Decimal(cents).scaleb(-2)
    specs = _schedule(monthly, grace)
    events: list[EventData] = []
    for i, count in enumerate(bought):
        first = order_term(
            specs,
            SPEC,
            "month",
            count,
            term=1,
            starts_at=START,
            ordered_at=START - timedelta(days=2 - i),  # the second bought later
        )
        events.append(
            SubscriptionPurchased(
                subscription_id=f"sub-{i}",
                group=GROUP,
                spec=SPEC,
                nodes=count,
                workspace="ws",
                currency="USD",
                scale=2,
                node=specs.sections[0].specs[SPEC],
                first=first,
            )
        )
    subs = fold_subscriptions(events)
    facts = _facts(nodes)
    grace_slots = grace // 5
    until = SLOTS + grace_slots  # the credit is decided a grace after the term's end
    stored = [(START + slot * SLOT, _event(node, action)) for slot, node, action in facts]
    deliveries = term_deliveries(subs.values(), node_states(stored), specs, START + until * SLOT)
    # the reference, slot by slot
    delivered = _delivered_per_slot(facts, len(nodes), until)
    subscribed = [sum(bought) if slot < SLOTS else 0 for slot in range(until)]
    short = [max(0, s - d) for s, d in zip(subscribed, delivered, strict=True)]
    counted = _counted(short, grace_slots)
    borne = [0] * len(bought)
    raw = [0] * len(bought)
    for slot in range(SLOTS):
        left, left_raw = counted[slot], short[slot]
        for i in reversed(range(len(bought))):  # the latest purchase is short first
            mine, mine_raw = min(bought[i], left), min(bought[i], left_raw)
            borne[i] += mine
            raw[i] += mine_raw
            left -= mine
            left_raw -= mine_raw
    unit_minor = to_minor(monthly, 2)
    slot_us = SLOT // timedelta(microseconds=1)
    assert len(deliveries) == len(bought)
    for d in deliveries:
        i = int(d.subscription_id.split("-")[1])
        sub = subs[d.subscription_id]
        assert d.subscribed_us == bought[i] * SLOTS * slot_us
        assert d.undelivered_us == borne[i] * slot_us
        assert d.short_us == raw[i] * slot_us
        credit = credit_minor(sub, d)
        assert credit == round(Fraction(borne[i] * unit_minor, SLOTS))
        assert 0 <= credit <= d.term.amount_minor == bought[i] * unit_minor
        if grace_slots <= 1:
            assert d.undelivered_us == d.short_us  # no run is shorter than the grace


def test_an_outage_shorter_than_the_grace_is_not_counted() -> None:
    specs = _schedule(Decimal("7440.00"), 15)
    first = order_term(specs, SPEC, "month", 1, term=1, starts_at=START, ordered_at=START)
    (sub,) = fold_subscriptions(
        [
            SubscriptionPurchased(
                subscription_id="sub-0",
                group=GROUP,
                spec=SPEC,
                nodes=1,
                workspace="ws",
                currency="USD",
                scale=2,
                node=specs.sections[0].specs[SPEC],
                first=first,
            )
        ]
    ).values()
    at = START + timedelta(days=3)
    stored = [
        (START, _event(0, "register")),
        (at, _event(0, "cordon")),
        (at + timedelta(minutes=14, seconds=59), _event(0, "uncordon")),  # under 15 minutes
        (at + timedelta(days=1), _event(0, "cordon")),
        (at + timedelta(days=1, minutes=15), _event(0, "uncordon")),  # the grace exactly
    ]
    (d,) = term_deliveries([sub], node_states(stored), specs, START + timedelta(days=40))
    assert d.short_us == (29 * 60 + 59) * 1_000_000
    assert d.undelivered_us == 15 * 60 * 1_000_000
    assert credit_minor(sub, d) == 250  # a quarter hour at 10.00 a node-hour
    assert d.down_nodes == {("n0", "cordoned"): 15 * 60 * 1_000_000}
