"""The victim search's fast path (:class:`~ledger.dispatch.victim_index.VictimIndex`,
candidates generated lazily in Kueue's order) decides exactly as Kueue's search as
written (``Decider(fast=False)``: every candidate collected and sorted), on random trees
and workloads; and the feasibility bound never rules out a search that finds victims."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.dispatch import Admitted, BorrowWithin, Incoming, Preemption, Snapshot
from ledger.dispatch.classical import classical_targets, surely_none
from ledger.dispatch.preemption import Decider
from tests.ledger.dispatch.test_properties import KEYS, T0, request, worlds


@st.composite
def crowded(draw: st.DrawFn) -> tuple[Snapshot, Incoming]:
    """A world from the properties' strategy, then more jobs forced in past the limits
    (the index must order many jobs of one quota, ties of priority and time included)."""
    snap, inc = draw(worlds(idle=True))
    leaves = sorted({wl.quota for wl in snap.admitted} | {inc.quota})
    extra = tuple(
        Admitted(
            f"x{j}",
            draw(st.sampled_from(leaves)),
            draw(st.integers(-2, 3)),
            request(draw, 3),
            T0 + timedelta(minutes=draw(st.integers(0, 5))),
            billing_mode=draw(st.sampled_from(["public", "public", "idle"])),
        )
        for j in range(draw(st.integers(0, 12)))
    )
    return Snapshot(snap.quotas, snap.admitted + extra, snap.fair_sharing, snap.strategies), inc


@st.composite
def contested(draw: st.DrawFn) -> tuple[Snapshot, Incoming]:
    """A crowded world where every quota preempts (borrowing within the cohort most of the
    time, equal priorities often): the rarer variants and reasons come up."""
    snap, inc = draw(crowded())
    quotas = tuple(
        replace(
            q,
            preemption=Preemption(
                within_quota=draw(st.sampled_from(["LowerPriority", "LowerOrNewerEqualPriority"])),
                reclaim=draw(st.sampled_from(["LowerPriority", "Any"])),
                borrow_within=BorrowWithin(
                    draw(st.sampled_from(["Never", "LowerPriority", "LowerPriority"])),
                    draw(st.none() | st.integers(-1, 3)),
                ),
            ),
        )
        for q in snap.quotas
    )
    inc = replace(inc, priority=draw(st.integers(0, 3)))
    return Snapshot(quotas, snap.admitted, snap.fair_sharing, snap.strategies), inc


@settings(max_examples=1500, deadline=None)
@given(contested())
def test_the_fast_search_decides_as_the_slow_one_where_everything_preempts(
    world: tuple[Snapshot, Incoming],
) -> None:
    """Where every quota preempts, the rare variants (equal priorities under
    ``LowerOrNewerEqualPriority`` and ``Any``, thresholds) differ in ~1% of the examples
    when the fast path gets them wrong: hence many examples."""
    snap, inc = world
    assert Decider(snap).decide(inc) == Decider(snap, fast=False).decide(inc)


@settings(max_examples=500, deadline=None)
@given(worlds(idle=True) | crowded())
def test_the_fast_search_decides_as_the_slow_one(world: tuple[Snapshot, Incoming]) -> None:
    snap, inc = world
    fast, slow = Decider(snap), Decider(snap, fast=False)
    assert fast.decide(inc) == slow.decide(inc)
    # and leaves the tree exactly as it found it
    again = Decider(snap).tree
    for name in fast.tree.nodes:
        for key in KEYS:
            assert fast.tree.usage(name, key) == again.usage(name, key)
            assert fast.tree.raw_usage(name, key) == again.raw_usage(name, key)


@settings(max_examples=200, deadline=None)
@given(crowded() | contested(), st.data())
def test_the_index_kept_in_step_decides_as_the_slow_search(
    world: tuple[Snapshot, Incoming], data: st.DataObject
) -> None:
    """Admissions and evictions after a search has ordered the quotas' jobs."""
    snap, inc = world
    split = data.draw(st.integers(0, len(snap.admitted)))
    first = Snapshot(snap.quotas, snap.admitted[:split], snap.fair_sharing, snap.strategies)
    fast = Decider(first)
    fast.decide(inc)
    for wl in snap.admitted[split:]:
        fast.admit(wl)
    gone = data.draw(st.lists(st.sampled_from([wl.job for wl in snap.admitted] or [""])))
    rest = list(snap.admitted)
    for job in dict.fromkeys(gone):
        if job:
            fast.evict(job)
            rest = [wl for wl in rest if wl.job != job]
    slow = Decider(
        Snapshot(snap.quotas, tuple(rest), snap.fair_sharing, snap.strategies), fast=False
    )
    assert fast.decide(inc) == slow.decide(inc)


@settings(max_examples=400, deadline=None)
@given(worlds() | crowded())
def test_the_bound_rules_out_only_searches_that_find_nothing(
    world: tuple[Snapshot, Incoming],
) -> None:
    """For each search the decider would run (each key short, then all of them): when the
    bound says no victims, Kueue's search as written finds none."""
    snap, inc = world
    decider = Decider(snap)
    tree, index = decider.tree, decider.victim_index
    req = {k: v for k, v in inc.resources.items() if v > 0}
    short = tree.keys_short(inc.quota, req)
    searches = [({k: req[k]}, {k}) for k in sorted(short)]
    if short:
        searches.append((req, short))
    for r, keys in searches:
        if surely_none(tree, index, inc, r, keys):
            assert classical_targets(tree, index, inc, r, keys) == []
