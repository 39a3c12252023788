"""The showback rule (issue 47 part 6), no database: a group's revenue goes to the quotas
drawing on it by guarantee, down the tree to the bound workspaces, the rest unattributed;
every share exact, then rounded by the largest remainder to add up to the minor unit."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.events import (
    QuotaCreated,
    QuotaSpec,
    SubscriptionPurchased,
    WorkspaceBound,
)
from ledger.quotas.model import QuotaTree
from ledger.subscriptions import fold_subscriptions, recognition_transactions
from ledger.subscriptions.orders import order_term
from ledger.subscriptions.showback import (
    NO_QUOTA,
    UNATTRIBUTED,
    TreeTimeline,
    attribute,
    largest_remainder,
    showback,
)
from tests.ledger.subscriptions.test_rules import schedule

GROUP = "grp"


def _spec(
    name: str, gpus: int, parent: str | None = None, groups: tuple[str, ...] = ()
) -> QuotaSpec:
    return QuotaSpec(quota_id=name, parent=parent, min={"gpu/any": gpus}, resource_groups=groups)


@st.composite
def trees(draw: st.DrawFn) -> tuple[QuotaTree, int]:
    """A group's capacity (mGPU) and a tree over it: tops with children, random
    guarantees (over the capacity sometimes), 0 to 2 workspaces per quota."""
    capacity = draw(st.integers(0, 64)) * 1000
    specs: dict[str, QuotaSpec] = {}
    bindings: dict[str, str] = {}
    for t in range(draw(st.integers(0, 3))):
        top = f"t{t}"
        specs[top] = _spec(top, draw(st.integers(0, 40)) * 1000, groups=(GROUP,))
        for c in range(draw(st.integers(0, 3))):
            kid = f"{top}c{c}"
            specs[kid] = _spec(kid, draw(st.integers(0, 30)) * 1000, parent=top)
    specs["payg"] = _spec("payg", 1000)  # draws on no group: never a share
    for name in specs:
        for w in range(draw(st.integers(0, 2))):
            bindings[f"ws-{name}-{w}"] = name
    return QuotaTree(specs=specs, bindings=bindings), capacity


def _gpu(spec: QuotaSpec) -> int:
    return sum(v for k, v in spec.min.items() if k.startswith("gpu/"))


@given(case=trees(), amount=st.integers(-(10**7), 10**9))
def test_the_shares_add_up_to_the_amount_exactly(case: tuple[QuotaTree, int], amount: int) -> None:
    tree, capacity = case
    shares = attribute(Fraction(amount), GROUP, tree, lambda g: capacity, _gpu)
    assert sum(shares.values(), Fraction(0)) == amount
    assert not any(ws.startswith("ws-payg") for ws, _ in shares)
    tops = [q for q, s in tree.specs.items() if s.resource_groups]
    guaranteed = sum(_gpu(tree.specs[q]) for q in tops)
    nobody = shares.get((UNATTRIBUTED, NO_QUOTA), Fraction(0))
    base = max(capacity, guaranteed)
    assert nobody == (amount * Fraction(base - guaranteed, base) if base else amount)
    # each top's subtree holds its guarantee's share of the amount
    for top in tops:
        subtree = sum(
            (v for (ws, q), v in shares.items() if q == top or q.startswith(f"{top}c")),
            Fraction(0),
        )
        assert subtree == (amount * Fraction(_gpu(tree.specs[top]), base) if base else 0)
    # a quota's workspaces share evenly
    by_quota: dict[str, set[Fraction]] = defaultdict(set)
    for (ws, q), v in shares.items():
        if ws != UNATTRIBUTED:
            by_quota[q].add(v)
    assert all(len(values) == 1 for values in by_quota.values())


@given(
    parts=st.lists(st.fractions(min_value=-1000, max_value=10**6, max_denominator=97), max_size=8)
)
def test_the_largest_remainder_keeps_the_total_and_each_share_within_a_unit(
    parts: list[Fraction],
) -> None:
    total = sum(parts, Fraction(0))
    # make the total whole, as a group's revenue is
    parts = [*parts, Fraction(round(total + Fraction(1, 2))) - total] if parts else parts
    total = sum(parts, Fraction(0))
    assert total.denominator == 1
    shares = {(f"ws-{i}", "q"): v for i, v in enumerate(parts)}
    rounded = largest_remainder(int(total), shares)
    assert sum(rounded.values()) == total
    assert all(abs(rounded[k] - v) < 1 for k, v in shares.items())


T0 = datetime(2027, 1, 1, tzinfo=UTC)
starts = st.integers(0, 400 * 24).map(lambda h: T0 + timedelta(hours=h))


@settings(max_examples=40, deadline=None)
@given(
    bought=st.lists(
        st.tuples(starts, st.sampled_from(["month", "year"]), st.integers(1, 8)),
        min_size=1,
        max_size=3,
    ),
    guarantee=st.integers(0, 80),
    window=st.tuples(starts, st.integers(1, 120)),
)
def test_per_month_the_shares_equal_the_revenue_the_ledger_recognises(
    bought: list[tuple[datetime, str, int]],
    guarantee: int,
    window: tuple[datetime, int],
) -> None:
    specs = schedule(Decimal("9800.00"), Decimal("98000.00"))
    events = []
    for i, (start, unit, nodes) in enumerate(bought):
        first = order_term(specs, "ml.test", unit, nodes, term=1, starts_at=start, ordered_at=start)  # type: ignore[arg-type]
        events.append(
            SubscriptionPurchased(
                subscription_id=f"sub-{i}",
                group=GROUP,
                spec="ml.test",
                nodes=nodes,
                workspace="ws-pay",
                auto_renew=False,
                currency="USD",
                scale=2,
                node=specs.section_at(start).specs["ml.test"],
                first=first,
            )
        )
    subs = list(fold_subscriptions(events).values())
    timeline = TreeTimeline(
        [
            (T0, QuotaCreated(spec=_spec("team", guarantee * 1000, groups=(GROUP,)))),
            (T0, WorkspaceBound(workspace="ws-a", quota="team")),
        ]
    )
    start = window[0]
    end = start + timedelta(days=window[1])
    shares = showback(subs, timeline, start, end, by_month=True)
    # the ledger's own recognition postings, independently: per period, the days ended
    expected: dict[str, int] = defaultdict(int)
    for sub in subs:
        for hi, txn in recognition_transactions(sub, end):
            if hi > start:
                expected[str(txn.period)] += -int(txn.postings[1].amount_minor)
    got: dict[str, int] = defaultdict(int)
    for (_, _, month), parts in shares.items():
        got[str(month)] += sum(parts.values())
    assert {k: v for k, v in got.items() if v} == {k: v for k, v in expected.items() if v}
