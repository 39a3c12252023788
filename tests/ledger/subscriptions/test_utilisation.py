"""The utilisation report's arithmetic: the hourly figures equal a plain span-by-span,
hour-by-hour reference on random subscriptions and spans, and the work does not grow
with a span's length (an occupancy left open to a far window end), so a capped window
answers in well under the API's statement timeout (issue 44)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.subscriptions import Subscription
from ledger.subscriptions.utilisation import (
    GroupMonth,
    OccupancySpan,
    Utilisation,
    _hours,
    _month,
    utilisation,
)
from tests.ledger.subscriptions.test_rules import build

T0 = datetime(2027, 1, 1, tzinfo=UTC)
DRAWN = {"q-a": ("g1",), "q-b": ("g1", "g2"), "q-c": ("g3",), "q-free": ()}


def _idle_rate(at: datetime) -> Decimal | None:
    return Decimal("0.5") if at.hour % 2 else None


def per_hour_reference(
    subs: Iterable[Subscription],
    spans: Iterable[OccupancySpan],
    drawn: Mapping[str, tuple[str, ...]],
    start: datetime,
    end: datetime,
    idle_gpu_rate: Callable[[datetime], Decimal | None],
) -> Utilisation:
    """The report as it was computed before issue 44: span by span, hour by hour."""
    capacity: dict[datetime, dict[str, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    for sub in subs:
        lo, hi = max(sub.starts_at, start), min(sub.ends_at, end)
        mgpu = sub.node.gpus * 1000 * sub.nodes
        for h, seconds in _hours(lo, hi):
            capacity[h][sub.group] += Fraction(mgpu) * Fraction(seconds)
    own: dict[datetime, dict[str, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    own_q: dict[datetime, dict[tuple[str, str], Fraction]] = defaultdict(
        lambda: defaultdict(Fraction)
    )
    idle_use: dict[datetime, Fraction] = defaultdict(Fraction)
    for span in spans:
        groups = drawn.get(span.quota or "", ())
        lo, hi = max(span.start, start), min(span.end, end)
        if hi <= lo or span.mgpu <= 0:
            continue
        if span.billing_mode == "idle" and not groups:
            for h, seconds in _hours(lo, hi):
                idle_use[h] += Fraction(span.mgpu) * Fraction(seconds)
        elif groups and span.billing_mode not in ("idle", "spot"):
            for h, seconds in _hours(lo, hi):
                have = capacity.get(h, {})
                total = sum((have.get(g, Fraction(0)) for g in groups), Fraction(0))
                amount = Fraction(span.mgpu) * Fraction(seconds)
                for g in groups:
                    share = have.get(g, Fraction(0)) / total if total else Fraction(1, len(groups))
                    own[h][g] += amount * share
                    assert span.quota is not None
                    own_q[h][(g, span.quota)] += amount * share
    months: dict[tuple[str, str], GroupMonth] = {}
    for h in sorted(capacity):
        month = _month(h)
        spare: dict[str, Fraction] = {}
        for g, sub_amount in capacity[h].items():
            figures = months.setdefault((g, month), GroupMonth())
            used = own[h].get(g, Fraction(0))
            figures.subscribed += sub_amount
            figures.used += min(used, sub_amount)
            figures.over += max(Fraction(0), used - sub_amount)
            for (gg, quota), amount in own_q[h].items():
                if gg == g:
                    figures.by_quota[quota] += amount
            spare[g] = max(Fraction(0), sub_amount - used)
        lendable = sum(spare.values(), Fraction(0))
        borrowed = min(idle_use.get(h, Fraction(0)), lendable)
        rate = idle_gpu_rate(h) if borrowed else None
        for g, room in spare.items():
            if not lendable or not room:
                continue
            lent = borrowed * room / lendable
            figures = months[(g, month)]
            figures.lent += lent
            if rate is not None:
                figures.lent_paid += lent / 3_600_000 * Fraction(rate)
    return Utilisation(months)


def _sub(group: str, start: datetime, nodes: int, terms: int, n: int) -> Subscription:
    case = build(Decimal(100), Decimal(1000), "month", nodes, start, terms)
    return replace(case.sub, subscription_id=f"sub-{n}", group=group)


def _plain(result: Utilisation) -> dict[tuple[str, str], tuple[object, ...]]:
    return {
        key: (
            m.subscribed,
            m.used,
            m.over,
            m.lent,
            m.lent_paid,
            {q: v for q, v in m.by_quota.items() if v},
        )
        for key, m in result.months.items()
    }


offsets = st.integers(-100 * 3600, 400 * 3600).map(lambda s: T0 + timedelta(seconds=s))
micro_offsets = st.integers(-100 * 3600 * 10**6, 400 * 3600 * 10**6).map(
    lambda us: T0 + timedelta(microseconds=us)
)
spans = st.builds(
    lambda quota, mode, mgpu, a, b: OccupancySpan(quota, "ws", mode, mgpu, min(a, b), max(a, b)),
    st.sampled_from([*DRAWN, None, "q-elsewhere"]),
    st.sampled_from(["public", "idle", "spot", "quota"]),
    st.integers(0, 8000),
    st.one_of(offsets, micro_offsets),
    st.one_of(offsets, micro_offsets),
)
subs = st.lists(
    st.builds(
        lambda group, start, nodes, terms: (group, start, nodes, terms),
        st.sampled_from(["g1", "g2", "g3"]),
        st.one_of(offsets, micro_offsets),
        st.integers(1, 4),
        st.just(1),
    ),
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(bought=subs, used=st.lists(spans, max_size=12), a=offsets, b=micro_offsets)
def test_the_figures_equal_the_hour_by_hour_reference(
    bought: list[tuple[str, datetime, int, int]],
    used: list[OccupancySpan],
    a: datetime,
    b: datetime,
) -> None:
    start, end = min(a, b), max(a, b)
    subscriptions = [_sub(g, s, nodes, terms, n) for n, (g, s, nodes, terms) in enumerate(bought)]
    got = utilisation(subscriptions, used, DRAWN, start, end, _idle_rate)
    want = per_hour_reference(subscriptions, used, DRAWN, start, end, _idle_rate)
    assert _plain(got) == _plain(want)


def test_open_occupancies_over_a_long_window_cost_what_the_subscriptions_cover() -> None:
    """Spans left open to a window end 44 years out (what ``to=2069`` made of a running
    pod): the old loop walked every hour of each (~385,000), this walks the hours the
    subscriptions cover in the window."""
    start, end = datetime(1970, 1, 1, tzinfo=UTC), datetime(2069, 12, 31, tzinfo=UTC)
    subscriptions = [_sub(f"g{n % 3 + 1}", T0 + timedelta(days=30 * n), 2, 2, n) for n in range(6)]
    far = [
        OccupancySpan(q, "ws", mode, 1000, T0 - timedelta(days=400), end)
        for q in DRAWN
        for mode in ("public", "idle")
        for _ in range(5)
    ]
    began = time.perf_counter()
    result = utilisation(subscriptions, far, DRAWN, start, end, _idle_rate)
    assert time.perf_counter() - began < 2.0
    assert result.months and all(m.used or m.lent for m in result.months.values())


def test_a_three_year_window_of_subscriptions_and_spans_is_fast() -> None:
    """The capped window (docs/api.md, "Limits": 1,096 days) covered by subscriptions end
    to end, with many spans across it: well under the 10 s statement timeout."""
    start = T0
    end = T0 + timedelta(days=1_096)
    subscriptions = [
        _sub(f"g{n % 3 + 1}", T0 + timedelta(days=365 * y), 4, 12, n)
        for n, y in enumerate([0, 0, 0, 1, 1, 1, 2, 2, 2])
    ]
    used = [
        OccupancySpan(q, "ws", mode, 500 * (k % 8 + 1), start + timedelta(hours=k), end)
        for k, (q, mode) in enumerate(
            (q, mode) for q in DRAWN for mode in ("public", "idle", "spot") for _ in range(50)
        )
    ]
    began = time.perf_counter()
    utilisation(subscriptions, used, DRAWN, start, end, _idle_rate)
    assert time.perf_counter() - began < 5.0
