"""One cycle over a pending queue: many admissions, a preemptor waits, blocked budgets."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from ledger.dispatch import Admitted, CycleInput, Incoming, Preemption, QuotaNode, plan_cycle

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _job(
    name: str, quota: str, gpu: float, minute: int, priority: int = 0, ws: str = ""
) -> Incoming:
    return Incoming(name, quota, priority, {"gpu": gpu}, T0 + timedelta(minutes=minute), ws)


def test_a_cycle_admits_every_job_that_fits() -> None:
    quotas = (QuotaNode("root"), QuotaNode("a", "root", {"gpu": 8}))
    pending = tuple(_job(f"j{i}", "a", 2, i) for i in range(5))
    result = plan_cycle(CycleInput(quotas, (), pending, T0 + timedelta(hours=1)))
    assert [d.job for d in result.admissions] == ["j0", "j1", "j2", "j3"]
    assert [(p.job, p.reason, p.position) for p in result.pending] == [("j4", "Parked", 1)]


def test_a_preemptor_is_not_admitted_in_the_cycle_that_preempts() -> None:
    quotas = (
        QuotaNode("root"),
        QuotaNode("a", "root", {"gpu": 4}, preemption=Preemption(within_quota="LowerPriority")),
    )
    low = Admitted("low", "a", 0, {"gpu": 4}, T0)
    result = plan_cycle(CycleInput(quotas, (low,), (_job("high", "a", 4, 1, 5),), T0))
    assert result.admissions == ()
    assert [v.job for v in result.preemptions[0].victims] == ["low"]
    assert result.pending[0].reason == "PreemptionPending"


def test_a_blocked_workspace_gets_nothing() -> None:
    quotas = (QuotaNode("root"), QuotaNode("a", "root", {"gpu": 8}))
    pending = (_job("x", "a", 1, 0, ws="broke"), _job("y", "a", 1, 1, ws="fine"))
    result = plan_cycle(
        CycleInput(quotas, (), pending, T0, blocked_workspaces=frozenset({"broke"}))
    )
    assert [d.job for d in result.admissions] == ["y"]
    assert [(p.job, p.reason) for p in result.pending] == [("x", "BudgetExhausted")]


def test_a_preemptor_whose_victims_stopped_gets_the_capacity_it_freed() -> None:
    """The thrash the closed-loop replay showed: the preemptor sits behind a blocked head of
    its own queue, its idle victim is requeued and offered in an earlier round."""
    from ledger.dispatch import QueueSettings

    quotas = (
        QuotaNode("root", None, {"gpu": 8}),
        QuotaNode("a", "root", {"gpu": 4}),
        QuotaNode("b", "root", {"gpu": 4}),
    )
    running = (Admitted("r", "b", 0, {"gpu": 4}, T0),)
    head = _job("h", "a", 6, 0, priority=9)
    preemptor = _job("p", "a", 4, 1, priority=5)
    victim = Incoming("v", "b", 0, {"gpu": 4}, T0 + timedelta(minutes=2), billing_mode="idle")
    queues = {"a": QueueSettings("Priority"), "b": QueueSettings("Priority")}
    cycle = CycleInput(
        quotas, running, (head, preemptor, victim), T0 + timedelta(hours=1), queues=queues
    )
    # as queued: the idle job takes the free GPUs (admitted in a cycle, no victim in it)
    plain = plan_cycle(cycle)
    assert [d.job for d in plain.admissions] == ["v"] and plain.preemptions == ()
    # the next cycle, the preemptor takes them back
    running_v = Admitted("v", "b", 0, {"gpu": 4}, T0, billing_mode="idle")
    taking = plan_cycle(replace(cycle, admitted=(*running, running_v), pending=(head, preemptor)))
    assert [(d.job, [v.job for v in d.victims]) for d in taking.preemptions] == [("p", ["v"])]
    # the victim stopped and requeued: without the reservation it would win the GPUs again
    assert [d.job for d in plan_cycle(cycle).admissions] == ["v"]
    # its victims gone, the preemptor's reservation holds: it is admitted first
    kept = plan_cycle(replace(cycle, reserved=frozenset({"p"})))
    assert [d.job for d in kept.admissions] == ["p"]
    assert kept.preemptions == ()
    assert {s.job: s.reason for s in kept.pending} == {
        "h": "WaitingForQuota",
        "v": "WaitingForQuota",
    }
