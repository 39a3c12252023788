"""The decision core from plain data: admission, preemption, reasons, errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ledger.dispatch import (
    Admitted,
    BorrowWithin,
    DispatchError,
    Incoming,
    Preemption,
    QuotaNode,
    Snapshot,
    Victim,
    decide,
)
from ledger.dispatch.capacity import Tree

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
        ((QuotaNode("p"), QuotaNode("q", "p")), "p", "only leaf quotas"),
        ((QuotaNode("q", "zz"),), "q", "unknown parent"),
        ((QuotaNode("p", "q"), QuotaNode("q", "p")), "q", "cycle"),
    ],
)
def test_bad_snapshots_are_refused(quotas: tuple[QuotaNode, ...], quota: str, message: str) -> None:
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
