"""The decision core from plain data: admission, preemption, reasons, errors."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from ledger.dispatch import (
    DEFAULT_STRATEGIES,
    Admitted,
    BorrowWithin,
    DispatchError,
    FairSharingStrategy,
    Incoming,
    Preemption,
    QuotaNode,
    Snapshot,
    Victim,
    decide,
    dominant_resource_share,
)
from ledger.dispatch.capacity import Tree
from ledger.dispatch.shares import share

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def job(name: str, quota: str, priority: int, cpu: float, minutes: int = 0) -> Admitted:
    return Admitted(name, quota, priority, {"cpu": cpu}, T0 + timedelta(minutes=minutes))


def incoming(quota: str, priority: int, cpu: float, minutes: int = 0) -> Incoming:
    return Incoming("in", quota, priority, {"cpu": cpu}, T0 + timedelta(minutes=minutes))


NO_PREEMPTION = Preemption()


def cohort(a: Preemption, b: Preemption = NO_PREEMPTION) -> tuple[QuotaNode, ...]:
    return (
        QuotaNode("cohort"),
        QuotaNode("a", "cohort", {"cpu": 4}, {"cpu": 8}, preemption=a),
        QuotaNode("b", "cohort", {"cpu": 4}, {"cpu": 8}, preemption=b),
    )


def test_admits_when_it_fits_without_touching_the_snapshot() -> None:
    snap = Snapshot(cohort(Preemption()), (job("a1", "a", 0, 2),))
    assert decide(snap, incoming("a", 0, 6)).outcome == "admit"
    assert decide(snap, incoming("a", 0, 7)).outcome == "pending"  # max 8
    assert snap.admitted == (job("a1", "a", 0, 2),)


def test_most_recently_admitted_goes_first_among_equals() -> None:
    pre = Preemption(within_quota="LowerPriority")
    snap = Snapshot(
        (QuotaNode("q", min={"cpu": 4}, preemption=pre),),
        (job("early", "q", 0, 2, minutes=0), job("late", "q", 0, 2, minutes=5)),
    )
    d = decide(snap, incoming("q", 1, 2))
    assert d.outcome == "preempt"
    assert d.victims == (Victim("late", "WithinQuota"),)


def test_other_quotas_borrowers_go_before_own_jobs() -> None:
    pre = Preemption(within_quota="LowerPriority", reclaim="LowerPriority")
    snap = Snapshot(cohort(pre), (job("a-low", "a", -5, 2), job("b-big", "b", 0, 6)))
    d = decide(snap, incoming("a", 1, 2))
    assert d.victims == (Victim("b-big", "Reclaim"),)


def test_never_policies_leave_it_pending() -> None:
    snap = Snapshot(cohort(Preemption()), (job("a-low", "a", -5, 2), job("b-big", "b", -5, 6)))
    assert decide(snap, incoming("a", 9, 2)).outcome == "pending"


def test_borrow_within_threshold_excludes_higher_priorities() -> None:
    pre = Preemption(
        reclaim="LowerPriority",
        borrow_within=BorrowWithin("LowerPriority", max_priority_threshold=0),
    )
    # a (min 4) would borrow after admission; b borrows 1 but its jobs are above threshold 0
    above = (job("a1", "a", 5, 3), job("b1", "b", 1, 3), job("b2", "b", 1, 2, minutes=5))
    assert decide(Snapshot(cohort(pre), above), incoming("a", 5, 2)).outcome == "pending"
    below = (job("a1", "a", 5, 3), job("b1", "b", 0, 3), job("b2", "b", 0, 2, minutes=5))
    d = decide(Snapshot(cohort(pre), below), incoming("a", 5, 2))
    assert d.outcome == "preempt"
    assert d.victims == (Victim("b2", "ReclaimWhileBorrowing"),)


def test_reclaim_within_an_ancestor_guarantee() -> None:
    # team (min 8) holds a and b; c outside borrows. a borrows from b's idle min, but the
    # team as a whole stays within its guarantee: c's job is reclaimed, reason Reclaim.
    pre = Preemption(reclaim="Any", borrow_within=BorrowWithin("LowerPriority"))
    quotas = (
        QuotaNode("root"),
        QuotaNode("team", "root", {"cpu": 8}),
        QuotaNode("a", "team", {"cpu": 2}, preemption=pre),
        QuotaNode("b", "team", {"cpu": 6}),
        QuotaNode("c", "root", {"cpu": 2}),
    )
    snap = Snapshot(quotas, (job("a1", "a", 0, 2), job("c1", "c", -1, 8)))
    d = decide(snap, incoming("a", 1, 2))
    assert d.outcome == "preempt"
    assert d.victims == (Victim("c1", "Reclaim"),)


def test_capacity_arithmetic_follows_kueue() -> None:
    quotas = (
        QuotaNode("cohort"),
        QuotaNode("l1", "cohort", {"cpu": 6}, lend_limit={"cpu": 4}),
        QuotaNode("l2", "cohort", {"cpu": 6}, lend_limit={"cpu": 2}),
    )
    tree = Tree(quotas, [job("x", "l2", 0, 7)])
    assert tree.subtree("cohort", "cpu") == 6  # lendable 4 + 2
    assert tree.usage("cohort", "cpu") == 3  # 7 - 4 guaranteed
    assert tree.available("l1", "cpu") == 2 + 3
    assert tree.available("l2", "cpu") == 3
    assert tree.is_borrowing("l2", "cpu")


@pytest.mark.parametrize(
    ("quotas", "quota", "message"),
    [
        ((QuotaNode("q"),), "nope", "unknown quota"),
        ((QuotaNode("q", "zz"),), "q", "unknown parent"),
        ((QuotaNode("p", "q"), QuotaNode("q", "p")), "q", "cycle"),
    ],
)
def test_bad_snapshots_are_refused(quotas: tuple[QuotaNode, ...], quota: str, message: str) -> None:
    # a workload on an inner quota is not one of them: it runs on the quota's own leaf
    # (ledger/dispatch/workloads.py; tests/ledger/dispatch/test_workloads.py)
    with pytest.raises(DispatchError, match=message):
        decide(Snapshot(quotas), incoming(quota, 0, 1))


def test_another_trees_borrower_is_not_a_victim() -> None:
    pre = Preemption(reclaim="Any")
    quotas = (*cohort(pre), QuotaNode("other"), QuotaNode("x", "other", {"cpu": 1}))
    # x is over-admitted (borrowing) in a tree of its own; only b's borrower makes room
    admitted = (job("a1", "a", 0, 3), job("b1", "b", 9, 5), job("x1", "x", -9, 3))
    d = decide(Snapshot(quotas, admitted), incoming("a", 0, 1))
    assert d.outcome == "preempt"
    assert d.victims == (Victim("b1", "Reclaim"),)


# dominant resource share ---------------------------------------------------------------


def test_dominant_resource_share_is_kueues() -> None:
    quotas = (
        QuotaNode("root"),
        QuotaNode("a", "root", {"cpu": 4, "memory/x": 4}),
        QuotaNode("b", "root", {"cpu": 4, "memory/y": 4}, weight=2),
        QuotaNode("z", "root", {"cpu": 0}, weight=0),
    )
    admitted = [
        Admitted("a1", "a", 0, {"cpu": 6, "memory/x": 1}, T0),
        Admitted("b1", "b", 0, {"cpu": 5, "memory/y": 7}, T0),
    ]
    tree = Tree(quotas, admitted)
    # a: borrows 2 cpu of the 8 its parent could lend -> 250 (ratio x 1000)
    assert dominant_resource_share(tree, "a") == 250
    # b: memory (both flavors, 8 lendable) is dominant: 3/8 -> 375, weight 2 -> 187.5
    assert dominant_resource_share(tree, "b") == 187.5
    assert share(tree, "b").dominant == "memory"
    # with an extra request added to a: 4 borrowed of 8
    assert dominant_resource_share(tree, "a", {"cpu": 2}) == 500
    assert dominant_resource_share(tree, "a") == 250  # the tree is left as it was
    # the root and a quota within its min have share 0; weight 0 while borrowing -> inf
    assert dominant_resource_share(tree, "root") == 0
    assert dominant_resource_share(tree, "z") == 0
    assert dominant_resource_share(tree, "z", {"cpu": 1}) == math.inf


def test_a_share_of_an_inner_node_counts_what_its_subtree_borrows() -> None:
    quotas = (
        QuotaNode("root", None, {"gpu": 10}),
        QuotaNode("org", "root", {"gpu": 4}),
        QuotaNode("t1", "org", {"gpu": 2}),
        QuotaNode("t2", "org", {"gpu": 2}),
        QuotaNode("other", "root", {"gpu": 6}),
    )
    tree = Tree(quotas, [Admitted("x", "t1", 0, {"gpu": 7}, T0)])
    # org uses 7 of its 4: 3 over the 10 root could lend it
    assert dominant_resource_share(tree, "org") == 300
    assert dominant_resource_share(tree, "t2") == 0
    # as the tournament asks: org's share once t2 admits 1 more
    assert dominant_resource_share(tree, "t2", {"gpu": 1}, of="org") == 400
    assert dominant_resource_share(tree, "org") == 300


# Kueue's flavor-assignment gate ---------------------------------------------------------


def test_a_request_above_min_is_not_preempted_for_without_borrow_within() -> None:
    # a (min 2) wants 3: above its min, no ancestor below the root to reclaim within,
    # no borrow_within -> Kueue does not even try, although b borrows
    pre = Preemption(within_quota="LowerPriority", reclaim="Any")
    quotas = (
        QuotaNode("root", None, {"cpu": 4}),
        QuotaNode("a", "root", {"cpu": 2}, preemption=pre),
        QuotaNode("b", "root", {"cpu": 2}),
    )
    snap = Snapshot(quotas, (job("a-low", "a", -1, 1), job("b1", "b", 0, 3)))
    assert decide(snap, incoming("a", 1, 3)).outcome == "pending"
    bw = Preemption("LowerPriority", "Any", BorrowWithin("LowerPriority"))
    quotas = (quotas[0], QuotaNode("a", "root", {"cpu": 2}, preemption=bw), quotas[2])
    d = decide(Snapshot(quotas, snap.admitted), incoming("a", 1, 3))
    assert d.outcome == "preempt"
    assert d.victims == (Victim("b1", "ReclaimWhileBorrowing"),)


def test_more_than_the_quota_could_ever_get_is_pending() -> None:
    pre = Preemption(within_quota="LowerPriority", reclaim="Any")
    quotas = (
        QuotaNode("root"),
        QuotaNode("a", "root", {"cpu": 6}, lend_limit={"cpu": 4}, preemption=pre),
        QuotaNode("b", "root", {"cpu": 6}, lend_limit={"cpu": 2}),
    )
    # a can reach its 2 unlendable plus the 6 lendable in the root: 8
    assert decide(Snapshot(quotas), incoming("a", 0, 8)).outcome == "admit"
    assert decide(Snapshot(quotas), incoming("a", 0, 9)).outcome == "pending"


# fair sharing ---------------------------------------------------------------------------


def fair(
    *admitted: Admitted, strategies: tuple[FairSharingStrategy, ...] = DEFAULT_STRATEGIES
) -> Snapshot:
    pre = Preemption(within_quota="LowerPriority", reclaim="Any")
    quotas = (
        QuotaNode("all"),
        QuotaNode("a", "all", {"cpu": 3}, preemption=pre),
        QuotaNode("b", "all", {"cpu": 3}, preemption=pre),
        QuotaNode("c", "all", {"cpu": 3}, preemption=pre),
    )
    return Snapshot(quotas, admitted, fair_sharing=True, strategies=strategies)


def units(quota: str, n: int, priority: int = 0) -> list[Admitted]:
    return [job(f"{quota}{i}", quota, priority, 1) for i in range(1, n + 1)]


def test_fair_sharing_takes_from_the_highest_share() -> None:
    # b borrows 2, c borrows 0: a (within its min after admission) reclaims from b
    snap = fair(*units("a", 3), *units("b", 5), *units("c", 1))
    d = decide(snap, incoming("c", 0, 1))
    assert d.victims == (Victim("b1", "Reclaim"),)
    # a borrowing preemptor: FairSharing, and only while its share stays below b's
    d = decide(snap, Incoming("in", "a", 0, {"cpu": 1}, T0))
    assert d.victims == (Victim("b1", "FairSharing"),)
    snap = fair(*units("a", 3), *units("b", 5))
    assert decide(snap, incoming("a", 0, 2)).outcome == "pending"  # would swap the imbalance


def test_fair_sharing_strategies_differ() -> None:
    admitted = (
        job("a1", "a", 0, 3),
        job("b_low", "b", 0, 5),
        job("b_high", "b", 1, 1),
    )
    initial = fair(*admitted, strategies=("LessThanInitialShare",))
    final = fair(*admitted, strategies=("LessThanOrEqualToFinalShare",))
    assert decide(initial, incoming("a", 0, 1)).victims == (Victim("b_low", "FairSharing"),)
    assert decide(final, incoming("a", 0, 1)).victims == (Victim("b_high", "FairSharing"),)


def test_fair_sharing_weight_zero_borrower_gives_way() -> None:
    pre = Preemption(within_quota="LowerPriority", reclaim="Any")
    quotas = (
        QuotaNode("all"),
        QuotaNode("a", "all", {"cpu": 3}, preemption=pre),
        QuotaNode("b", "all", {"cpu": 3}, preemption=pre, weight=0),
    )
    snap = Snapshot(quotas, tuple(units("a", 3) + units("b", 3)), fair_sharing=True)
    assert decide(snap, incoming("a", 0, 1)).outcome == "pending"  # b is within its min


# idle mode ------------------------------------------------------------------------------


def idle(name: str, quota: str, priority: int, cpu: float, minutes: int = 0) -> Admitted:
    return Admitted(
        name, quota, priority, {"cpu": cpu}, T0 + timedelta(minutes=minutes), billing_mode="idle"
    )


def test_idle_jobs_go_first_and_only_as_many_as_needed() -> None:
    pre = Preemption(reclaim="LowerPriority")
    snap = Snapshot(
        cohort(pre),
        (job("a1", "a", 0, 4), idle("b-idle-1", "b", 9, 2), idle("b-idle-2", "b", 9, 2, 5)),
    )
    d = decide(snap, incoming("a", 0, 2))
    # most recently admitted first; one is enough
    assert d.victims == (Victim("b-idle-2", "Reclaim"),)


def test_an_idle_incoming_ignores_its_quota_max_but_not_the_root() -> None:
    quotas = (
        QuotaNode("root", None, {"cpu": 10}),
        QuotaNode("a", "root", {"cpu": 2}, {"cpu": 2}),
        QuotaNode("b", "root", {"cpu": 8}),
    )
    snap = Snapshot(quotas, (job("b1", "b", 0, 4),))
    as_idle = Incoming("in", "a", 0, {"cpu": 6}, T0, billing_mode="idle")
    assert decide(snap, as_idle).outcome == "admit"
    assert decide(snap, incoming("a", 0, 6)).outcome == "pending"
    too_big = Incoming("in", "a", 0, {"cpu": 7}, T0, billing_mode="idle")
    assert decide(snap, too_big).outcome == "pending"
