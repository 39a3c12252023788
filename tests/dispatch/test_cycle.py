"""One cycle over a pending queue: many admissions, a preemptor waits, blocked budgets."""

from __future__ import annotations

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
