"""Queue policies in one cycle: each on a queue where it changes the order or what is
admitted behind a blocked head; BestEffortFIFO parking; preemptors in the same cycle."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from ledger.dispatch import (
    Admitted,
    CycleInput,
    CycleResult,
    DispatchError,
    Incoming,
    Preemption,
    QueuePolicyName,
    QueueSettings,
    QuotaNode,
    plan_cycle,
)
from ledger.dispatch.cycle import relevant_changes

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TIMEOUT = timedelta(minutes=10)


def job(name: str, gpu: float, minute: int = 0, priority: int = 0, quota: str = "a") -> Incoming:
    return Incoming(name, quota, priority, {"gpu": gpu}, T0 + timedelta(minutes=minute))


def running(name: str, gpu: float, quota: str = "a", priority: int = 0) -> Admitted:
    return Admitted(name, quota, priority, {"gpu": gpu}, T0 - timedelta(hours=1))


# one leaf with 4 GPUs, 2 of them busy: 2 free
QUOTAS = (QuotaNode("root"), QuotaNode("a", "root", {"gpu": 4}))
BUSY = (running("busy", 2),)


def cycle(
    policy: QueuePolicyName,
    pending: tuple[Incoming, ...],
    minutes: float = 1,
    **kw: object,
) -> CycleResult:
    settings = QueueSettings(policy, balance_timeout=TIMEOUT, aging_interval=TIMEOUT)
    given = CycleInput(
        QUOTAS, BUSY, pending, T0 + timedelta(minutes=minutes), queues={"a": settings}
    )
    return plan_cycle(replace(given, **kw))  # type: ignore[arg-type]


def admitted(result: CycleResult) -> list[str]:
    return [d.job for d in result.admissions]


def waiting(result: CycleResult) -> list[tuple[str, str, int]]:
    return [(p.job, p.reason, p.position) for p in result.pending]


BLOCKED_HEAD = (job("big", 3, 0), job("s1", 1, 1), job("s2", 1, 2))


def test_fifo_never_skips_a_blocked_head() -> None:
    result = cycle("FIFO", BLOCKED_HEAD)
    assert admitted(result) == []
    assert waiting(result) == [
        ("big", "WaitingForQuota", 1),
        ("s1", "WaitingForQuota", 2),
        ("s2", "WaitingForQuota", 3),
    ]


def test_round_robin_skips_a_blocked_head() -> None:
    result = cycle("RoundRobin", BLOCKED_HEAD)
    assert admitted(result) == ["s1", "s2"]
    assert waiting(result) == [("big", "WaitingForQuota", 1)]


def test_strict_fifo_holds_and_priority_skips() -> None:
    assert admitted(cycle("StrictFIFO", BLOCKED_HEAD)) == []
    assert admitted(cycle("Priority", BLOCKED_HEAD)) == ["s1", "s2"]


def test_queues_order_by_priority_then_queue_time() -> None:
    pending = (job("old", 2, 0, priority=1), job("urgent", 2, 5, priority=5))
    for policy in ("FIFO", "RoundRobin", "StrictFIFO", "Priority", "Balance"):
        result = cycle(policy, pending)
        assert admitted(result) == ["urgent"], policy
        assert waiting(result)[0][:2] == ("old", "WaitingForQuota"), policy


BALANCE = (job("big", 3, 0), job("s1", 1, 1), job("mid", 3, 2), job("s2", 1, 3))


def test_balance_is_fifo_until_the_head_has_waited_its_timeout() -> None:
    assert admitted(cycle("Balance", BALANCE, minutes=10)) == []


def test_balance_round_robins_over_two_jobs_after_one_timeout() -> None:
    result = cycle("Balance", BALANCE, minutes=15)
    # big is skipped, s1 admitted, mid is the second blocked job: the window of 2 is full
    assert admitted(result) == ["s1"]
    assert [w[0] for w in waiting(result)] == ["big", "mid", "s2"]


def test_balance_widens_by_one_per_further_timeout() -> None:
    assert admitted(cycle("Balance", BALANCE, minutes=25)) == ["s1", "s2"]
    assert admitted(cycle("RoundRobin", BALANCE, minutes=1)) == ["s1", "s2"]


def test_intelligent_ages_a_waiting_job_up_to_six() -> None:
    pending = (job("old", 2, 0, priority=3), job("new", 2, 25, priority=5))
    # at 26 minutes old has waited two intervals: 3 + 2 = 5, ties with new, older first
    assert admitted(cycle("Intelligent", pending, minutes=26)) == ["old"]
    # at 11 minutes (new not yet queued long): 3 + 1 = 4 < 5
    early = (job("old", 2, 0, priority=3), job("new", 2, 5, priority=5))
    assert admitted(cycle("Intelligent", early, minutes=11)) == ["new"]
    # Priority (no aging) keeps the order by the job's own priority
    assert admitted(cycle("Priority", pending, minutes=26)) == ["new"]


def test_intelligent_aging_never_reaches_the_fifo_band() -> None:
    pending = (job("ancient", 2, -10_000, priority=1), job("high", 2, 50, priority=7))
    result = cycle("Intelligent", pending, minutes=60)
    assert admitted(result) == ["high"]
    assert waiting(result) == [("ancient", "WaitingForQuota", 1)]


def test_intelligent_is_fifo_for_seven_and_up_and_round_robin_below() -> None:
    high_blocked = (job("h", 3, 0, priority=8), job("low", 1, 1, priority=2))
    result = cycle("Intelligent", high_blocked)
    assert admitted(result) == []  # a blocked job of priority >= 7 holds the queue
    low_blocked = (job("l1", 3, 0, priority=6), job("l2", 1, 1, priority=2))
    assert admitted(cycle("Intelligent", low_blocked)) == ["l2"]  # below 7: skipped


def test_best_effort_fifo_parks_a_failed_head_and_admits_behind_it() -> None:
    result = cycle("BestEffortFIFO", BLOCKED_HEAD)
    assert admitted(result) == ["s1", "s2"]
    assert waiting(result) == [("big", "Parked", 1)]
    assert result.parked == {"big"}


def test_a_parked_job_waits_until_capacity_is_freed_in_its_tree() -> None:
    first = CycleInput(QUOTAS, BUSY, (job("big", 3),), T0)
    parked = plan_cycle(first).parked
    assert parked == {"big"}
    # the busy job ended, but nobody says so: big stays parked, a newcomer still runs
    freed = replace(first, admitted=(), pending=(job("big", 3), job("new", 1, 5)), parked=parked)
    still = plan_cycle(freed)
    assert admitted(still) == ["new"]
    assert waiting(still) == [("big", "Parked", 1)]
    # with the change named (capacity freed in the tree), big is retried and admitted
    requeue = relevant_changes(first, freed)
    assert requeue == {"root"}
    assert admitted(plan_cycle(replace(freed, requeue=requeue))) == ["big", "new"]
    assert plan_cycle(replace(freed, requeue=requeue)).parked == frozenset()


def test_relevant_changes_sees_quota_changes_only_in_their_tree() -> None:
    quotas = (*QUOTAS, QuotaNode("other"), QuotaNode("o1", "other", {"gpu": 2}))
    before = CycleInput(quotas, BUSY, (), T0)
    bigger = (quotas[0], QuotaNode("a", "root", {"gpu": 8}), *quotas[2:])
    assert relevant_changes(before, replace(before, quotas=bigger)) == {"root"}
    more = replace(before, admitted=(*BUSY, running("x", 1, "o1")))
    assert relevant_changes(before, more) == frozenset()  # admitting frees nothing


def test_a_job_that_can_never_fit_is_flagged_and_holds_a_fifo_queue_unless_skipped() -> None:
    capped = (QuotaNode("root", min={"gpu": 16}), QuotaNode("a", "root", {"gpu": 4}, {"gpu": 6}))
    pending = (job("huge", 8, 0), job("s1", 1, 1))
    retried = plan_cycle(CycleInput(capped, BUSY, pending, T0, queues={"a": QueueSettings("FIFO")}))
    assert admitted(retried) == []  # on_unfit_head: Retry, the default (PAI's, Kueue's)
    assert waiting(retried) == [("huge", "ExceedsMaxQuota", 1), ("s1", "WaitingForQuota", 2)]
    skip = {"a": QueueSettings("FIFO", on_unfit_head="Skip")}
    result = plan_cycle(CycleInput(capped, BUSY, pending, T0, queues=skip))
    assert admitted(result) == ["s1"]
    assert waiting(result) == [("huge", "ExceedsMaxQuota", 1)]


def test_a_policy_change_reorders_only_pending_jobs() -> None:
    # the running job has a lower priority than a waiting one: no policy evicts it
    busy = (running("low-running", 2, priority=0),)
    pending = (job("big", 3, 0, priority=9), job("s1", 1, 1))
    for policy in ("FIFO", "RoundRobin", "Intelligent", "StrictFIFO", "Priority", "Balance"):
        settings = QueueSettings(policy)
        result = plan_cycle(CycleInput(QUOTAS, busy, pending, T0, queues={"a": settings}))
        assert result.preemptions == (), policy
        assert {p.job for p in result.pending} | set(admitted(result)) == {"big", "s1"}
    fifo = plan_cycle(CycleInput(QUOTAS, busy, pending, T0, queues={"a": QueueSettings("FIFO")}))
    rr = plan_cycle(
        CycleInput(QUOTAS, busy, pending, T0, queues={"a": QueueSettings("RoundRobin")})
    )
    assert (admitted(fifo), admitted(rr)) == ([], ["s1"])


def test_two_preemptors_never_share_a_victim_or_its_capacity() -> None:
    quotas = (
        QuotaNode("root"),
        QuotaNode("a", "root", {"gpu": 4}, preemption=Preemption(within_quota="LowerPriority")),
    )
    low = running("low", 4)
    pending = (job("h1", 4, 0, priority=5), job("h2", 4, 1, priority=5), job("s", 1, 2))
    result = plan_cycle(
        CycleInput(quotas, (low,), pending, T0, queues={"a": QueueSettings("Priority")})
    )
    assert [(d.job, [v.job for v in d.victims]) for d in result.preemptions] == [("h1", ["low"])]
    # h1's reservation and the still-running victim leave nothing for h2 or s this cycle
    assert admitted(result) == []
    assert waiting(result) == [
        ("h1", "PreemptionPending", 1),
        ("h2", "WaitingForQuota", 2),
        ("s", "WaitingForQuota", 3),
    ]


def test_a_preempting_job_keeps_its_reservation_until_its_victims_stop() -> None:
    # the victim has stopped; the preemptor is still marked preempting: nobody else takes it
    pending = (job("pre", 4, 0, priority=5), job("s", 1, 1))
    result = plan_cycle(CycleInput(QUOTAS, (), pending, T0, preempting=frozenset({"pre"})))
    assert admitted(result) == []
    assert waiting(result)[0][:2] == ("pre", "PreemptionPending")


TWO = (
    QuotaNode("root", min={"gpu": 8}),
    QuotaNode("a", "root", {"gpu": 4}, {"gpu": 8}),
    QuotaNode("b", "root", {"gpu": 4}, {"gpu": 8}),
)


def test_across_quotas_a_job_within_its_min_goes_before_a_borrower() -> None:
    admitted_now = (running("a-run", 4, "a"),)
    pending = (job("a-borrows", 4, 0, 9, "a"), job("b-within", 4, 5, 0, "b"))
    result = plan_cycle(CycleInput(TWO, admitted_now, pending, T0 + timedelta(hours=1)))
    assert admitted(result) == ["b-within"]
    assert [(p.job, p.position, p.cohort_position) for p in result.pending] == [("a-borrows", 1, 1)]


def test_across_quotas_priority_then_queue_time() -> None:
    pending = (
        job("a1", 4, 0, 1, "a"),
        job("a2", 4, 1, 1, "a"),
        job("b1", 4, 3, 5, "b"),
        job("b2", 4, 4, 0, "b"),
    )
    result = plan_cycle(
        CycleInput(
            (QuotaNode("root", min={"gpu": 8}), *TWO[1:]),
            (running("x", 4, "a"),),
            pending,
            T0 + timedelta(hours=1),
            queues={q: QueueSettings("StrictFIFO") for q in ("a", "b")},
        )
    )
    assert admitted(result) == ["b1"]
    # positions: in each quota's queue, and across the tree by priority then queue time
    assert [(p.job, p.position, p.cohort_position) for p in result.pending] == [
        ("a1", 1, 1),
        ("a2", 2, 2),
        ("b2", 1, 3),
    ]


def test_with_fair_sharing_the_lower_share_goes_first() -> None:
    tree = (
        QuotaNode("root", min={"gpu": 14}),
        QuotaNode("a", "root", {"gpu": 4}, {"gpu": 14}),
        QuotaNode("b", "root", {"gpu": 4}, {"gpu": 14}),
        QuotaNode("c", "root", {"gpu": 4}, {"gpu": 14}),
    )
    # 2 GPUs free; both heads would borrow: a already borrows 4, b nothing yet
    busy = (running("a-run", 8, "a"), running("b-run", 4, "b"))
    pending = (job("a-more", 2, 0, 5, "a"), job("b-more", 2, 9, 0, "b"))
    base = CycleInput(tree, busy, pending, T0 + timedelta(hours=1))
    # fair sharing: b's share once its job is in is lower, its newer low-priority job first
    assert admitted(plan_cycle(replace(base, fair_sharing=True))) == ["b-more"]
    # without: priority decides between two borrowers
    assert admitted(plan_cycle(base)) == ["a-more"]


def test_fair_sharing_compares_departments_before_their_teams() -> None:
    # Kueue's tournament: x1's job keeps x1 within its min, but its department X would
    # borrow more than Y with y1's job: Y's job goes first
    tree = (
        QuotaNode("root", min={"gpu": 16}),
        QuotaNode("X", "root"),
        QuotaNode("Y", "root"),
        QuotaNode("x1", "X", {"gpu": 2}, {"gpu": 16}),
        QuotaNode("x2", "X", {"gpu": 2}, {"gpu": 16}),
        QuotaNode("y1", "Y", {"gpu": 4}, {"gpu": 16}),
    )
    busy = (running("x2-run", 6, "x2"), running("y1-run", 6, "y1"))
    pending = (job("x-job", 2, 0, 0, "x1"), job("y-job", 1, 5, 0, "y1"))
    base = CycleInput(tree, busy, pending, T0 + timedelta(hours=1))
    assert admitted(plan_cycle(replace(base, fair_sharing=True))) == ["y-job", "x-job"]
    assert admitted(plan_cycle(base)) == ["x-job", "y-job"]


def test_a_job_both_running_and_pending_is_refused_by_name() -> None:
    with pytest.raises(DispatchError, match="job 'busy' is admitted and pending"):
        plan_cycle(CycleInput(QUOTAS, BUSY, (job("busy", 1),), T0))
    with pytest.raises(DispatchError, match="job 'x' is pending twice"):
        plan_cycle(CycleInput(QUOTAS, (), (job("x", 1), job("x", 2)), T0))
    with pytest.raises(DispatchError, match="job 'y': unknown quota 'nowhere'"):
        plan_cycle(CycleInput(QUOTAS, (), (job("y", 1, quota="nowhere"),), T0))
