"""One dispatcher cycle, pure: the quota tree, the admitted workloads and the pending
queue in; every admission, preemption and pending reason of the cycle out.

A cycle admits as many jobs as fit (no one-pop-per-queue ceiling, Kueue #14477); a job
that preempts is not admitted in the cycle that preempts (its victims must stop first).
The live loop (``consumers/dispatcher``), the closed-loop replay and the benchmark all
call :func:`plan_cycle`; ``jobs why`` reads its :class:`PendingStatus`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from ledger.dispatch.model import Admitted, Decision, Incoming, QuotaNode, Snapshot
from ledger.dispatch.preemption import decide

__all__ = [
    "CycleInput",
    "CycleResult",
    "PendingReason",
    "PendingStatus",
    "QueuePolicyName",
    "QueueSettings",
    "plan_cycle",
]

#: PAI's four and Kueue's: see docs/dispatch.md for each one's order and skipping rule.
QueuePolicyName = Literal[
    "FIFO", "RoundRobin", "Balance", "Intelligent", "StrictFIFO", "BestEffortFIFO", "Priority"
]
PendingReason = Literal[
    "ExceedsMaxQuota", "WaitingForQuota", "PreemptionPending", "BudgetExhausted", "Parked"
]


@dataclass(frozen=True)
class QueueSettings:
    """A quota's queue policy; the durations matter to ``Balance`` and ``Intelligent``."""

    policy: QueuePolicyName = "BestEffortFIFO"
    balance_timeout: timedelta = timedelta(minutes=10)
    aging_interval: timedelta = timedelta(minutes=10)


@dataclass(frozen=True)
class CycleInput:
    quotas: tuple[QuotaNode, ...]
    admitted: tuple[Admitted, ...]
    #: pending jobs, any order (``created_at`` is when the job was queued)
    pending: tuple[Incoming, ...]
    now: datetime
    #: queue settings by leaf quota; a quota missing here gets ``QueueSettings()``
    queues: Mapping[str, QueueSettings] = field(default_factory=dict)
    #: jobs BestEffortFIFO parked in an earlier cycle, retried when something relevant changes
    parked: frozenset[str] = frozenset()
    #: workspaces whose ``stop`` budget is exhausted: nothing of theirs is admitted
    blocked_workspaces: frozenset[str] = frozenset()
    #: preemptors whose victims are still being stopped: they wait, nothing new is decided
    preempting: frozenset[str] = frozenset()


@dataclass(frozen=True)
class PendingStatus:
    job: str
    quota: str
    reason: PendingReason
    #: 1-based position in its quota's queue and in its whole tree (cohort), in policy order
    position: int
    cohort_position: int


@dataclass(frozen=True)
class CycleResult:
    admissions: tuple[Decision, ...] = ()
    preemptions: tuple[Decision, ...] = ()
    pending: tuple[PendingStatus, ...] = ()
    parked: frozenset[str] = frozenset()


def plan_cycle(cycle: CycleInput) -> CycleResult:
    """Every decision of one cycle. Baseline order: oldest first across the tree, then
    priority; each job is decided against the state left by the ones before it."""
    order = sorted(cycle.pending, key=lambda j: (j.created_at, -j.priority, j.job))
    admitted = list(cycle.admitted)
    admissions: list[Decision] = []
    preemptions: list[Decision] = []
    waiting: list[tuple[Incoming, PendingReason]] = []
    for job in order:
        if job.workspace and job.workspace in cycle.blocked_workspaces:
            waiting.append((job, "BudgetExhausted"))
            continue
        if job.job in cycle.preempting:
            waiting.append((job, "PreemptionPending"))
            continue
        decision = decide(Snapshot(cycle.quotas, tuple(admitted)), job)
        if decision.outcome == "admit":
            admissions.append(decision)
            admitted.append(_admitted(job, cycle.now))
        elif decision.outcome == "preempt":
            preemptions.append(decision)
            victims = {v.job for v in decision.victims}
            admitted = [wl for wl in admitted if wl.job not in victims]
            waiting.append((job, "PreemptionPending"))
        else:
            waiting.append((job, "WaitingForQuota"))
    return CycleResult(tuple(admissions), tuple(preemptions), _positions(waiting), frozenset())


def _admitted(job: Incoming, now: datetime) -> Admitted:
    return Admitted(
        job.job, job.quota, job.priority, job.resources, now, job.workspace, job.billing_mode
    )


def _positions(waiting: list[tuple[Incoming, PendingReason]]) -> tuple[PendingStatus, ...]:
    per_quota: dict[str, int] = {}
    out: list[PendingStatus] = []
    for n, (job, reason) in enumerate(waiting, start=1):
        per_quota[job.quota] = per_quota.get(job.quota, 0) + 1
        out.append(PendingStatus(job.job, job.quota, reason, per_quota[job.quota], n))
    return tuple(out)
