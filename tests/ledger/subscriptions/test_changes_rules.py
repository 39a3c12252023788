"""The pure rules of a subscription that changes (``ledger/subscriptions/changes.py``): the
price of nodes added mid-term, the node count over time, the refusals, and what the SLA
credit's sweep sees of them (the nodes added count from their instant)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from ledger.errors import Conflict, Invalid
from ledger.events import (
    NodeRegistered,
    NodeSpec,
    QuotaCreated,
    QuotaSpec,
    SlaCommitment,
    SubscriptionPricesPublished,
    SubscriptionPurchased,
    SubscriptionRenewed,
    WorkspaceBound,
)
from ledger.subscriptions import (
    SpecSchedule,
    Subscription,
    add_nodes,
    fold_subscriptions,
    recognition_transactions,
    schedule_nodes,
)
from ledger.subscriptions.orders import next_term, order_term
from ledger.subscriptions.showback import UNATTRIBUTED, TreeTimeline, showback
from ledger.subscriptions.sla import credit_minor, node_states, term_deliveries

START = datetime(2027, 1, 1, tzinfo=UTC)  # a 31-day month
SPEC = "ml.test"


def _specs() -> SpecSchedule:
    node = NodeSpec(
        gpus=8,
        cpu_milli=8000,
        memory_mib=65536,
        monthly=Decimal("7440.00"),
        yearly=Decimal("74400.00"),
        sla=SlaCommitment(grace_minutes=15),
    )
    section = SubscriptionPricesPublished(
        book_id="book",
        currency="USD",
        scale=2,
        effective_from=datetime(2020, 1, 1, tzinfo=UTC),
        specs={SPEC: node},
    )
    return SpecSchedule([section])


def _sub(nodes: int = 1) -> Subscription:
    specs = _specs()
    first = order_term(specs, SPEC, "month", nodes, term=1, starts_at=START, ordered_at=START)
    (sub,) = fold_subscriptions(
        [
            SubscriptionPurchased(
                subscription_id="sub-0",
                group="grp",
                spec=SPEC,
                nodes=nodes,
                workspace="ws",
                currency="USD",
                scale=2,
                node=specs.sections[0].specs[SPEC],
                first=first,
            )
        ]
    ).values()
    return sub


def test_nodes_added_are_priced_by_started_day_and_counted_from_their_instant() -> None:
    sub = _sub()
    at = START + timedelta(days=10, hours=1)  # 20 days 23 hours left: 21 started days
    added = add_nodes(sub, 2, at, "k")
    assert (added.days, added.term_days, added.nodes_after) == (21, 31, 3)
    assert added.part.amount_minor == 1_008_000  # 7,440.00 x 21 / 31 x 2 = 10,080.00
    assert (added.part.starts_at, added.part.ends_at) == (at, sub.last_term.ends_at)
    after = sub.after(added)
    assert [after.nodes_at(t) for t in (at - timedelta(microseconds=1), at)] == [1, 3]
    assert after.nodes_at(after.last_term.ends_at) == 0  # co-terminated
    assert after.renewal_nodes == 3  # the next term is ordered with them
    renewed = after.after(
        SubscriptionRenewed(subscription_id="sub-0", next=next_term(after, _specs(), at))
    )
    assert renewed.terms[1].amount_minor == 3 * 744_000
    assert renewed.nodes_at(renewed.terms[1].starts_at) == 3


def test_a_whole_term_added_costs_the_term_and_a_count_at_renewal_applies_there() -> None:
    sub = _sub(2)
    assert add_nodes(sub, 1, START, "k").part.amount_minor == 744_000  # 31 of 31 days
    change = schedule_nodes(sub, 1, START + timedelta(days=3), "fewer")
    shrunk = sub.after(change)
    assert (change.from_term, shrunk.renewal_nodes, shrunk.nodes_at(START)) == (2, 1, 2)
    term = next_term(shrunk, _specs(), START + timedelta(days=28))
    assert term.amount_minor == 744_000
    renewed = shrunk.after(SubscriptionRenewed(subscription_id="sub-0", next=term))
    assert [renewed.nodes_of(t.term) for t in renewed.terms] == [2, 1]
    assert renewed.pending_nodes is None


def test_the_refusals() -> None:
    sub = _sub()
    with pytest.raises(Conflict, match="add nodes once it runs"):
        add_nodes(sub, 1, START - timedelta(days=1), "k")
    with pytest.raises(Conflict, match="expired"):
        add_nodes(sub, 1, START + timedelta(days=40), "k")
    with pytest.raises(Invalid, match="at least 1 node"):
        schedule_nodes(sub, 0, START, "k")
    renewed = sub.after(
        SubscriptionRenewed(
            subscription_id="sub-0", next=next_term(sub, _specs(), START + timedelta(days=28))
        )
    )
    with pytest.raises(Conflict, match="term 2 ordered already"):
        add_nodes(renewed, 1, START + timedelta(days=29), "k")


def test_the_sla_sweep_counts_the_nodes_added_from_their_instant() -> None:
    """One node delivered all month, a second subscribed from day 10 and never delivered:
    21 days x 24 hours short, credited at 7,440.00 / 744 hours = 10.00 a node-hour."""
    sub = _sub()
    sub = sub.after(add_nodes(sub, 1, START + timedelta(days=10), "k"))
    stored = [
        (
            START,
            NodeRegistered(
                node="n0", resource_group="grp", gpus=8, cpu_milli=8000, memory_mib=65536
            ),
        )
    ]
    (d,) = term_deliveries([sub], node_states(stored), _specs(), START + timedelta(days=40))
    day = 86_400 * 1_000_000
    assert d.subscribed_us == 31 * day + 21 * day
    assert d.undelivered_us == 21 * day
    assert credit_minor(sub, d) == 21 * 24 * 1_000  # 5,040.00


def test_the_showback_shares_the_nodes_added_from_their_instant() -> None:
    """1 node (8 GPUs) from 2027-01-01, a second added on 2027-01-11: the quota guarantees
    8 GPUs, so it bears all of the first 10 days and half of each day after (the rest is
    unattributed); and the nodes added are recognised, so the shares add up to all of it."""
    sub = _sub()
    sub = sub.after(add_nodes(sub, 1, START + timedelta(days=10), "k"))
    quota = QuotaSpec(quota_id="team", min={"gpu/any": 8000}, resource_groups=("grp",))
    timeline = TreeTimeline(
        [
            (START, QuotaCreated(spec=quota)),
            (START, WorkspaceBound(workspace="ws-a", quota="team")),
        ]
    )
    end = START + timedelta(days=31)
    ((_, parts),) = showback([sub], timeline, START, end, by_month=False).items()
    recognised = sum(
        -int(t.postings[1].amount_minor) for _, t in recognition_transactions(sub, end)
    )
    assert recognised == 744_000 + 504_000  # the term, and 21 days of a second node
    assert sum(parts.values()) == recognised
    # ws-a: 10 days of 1 node (240,000) + half of 21 days of 2 nodes (2 x 504,000 / 2)
    assert parts[("ws-a", "team")] == 240_000 + 504_000
    assert sum(v for (who, _), v in parts.items() if who == UNATTRIBUTED) == 504_000
