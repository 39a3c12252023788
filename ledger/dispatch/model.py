"""The dispatcher's plain data: a quota-tree snapshot, workloads, a decision."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from ledger.errors import Invalid

__all__ = [
    "DEFAULT_STRATEGIES",
    "Admitted",
    "BorrowWithin",
    "Decision",
    "DispatchError",
    "FairSharingStrategy",
    "Incoming",
    "Outcome",
    "Preemption",
    "QuotaNode",
    "Reason",
    "Snapshot",
    "Victim",
    "WorkloadClass",
]

Quantities = Mapping[str, float]
WithinQuotaPolicy = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
ReclaimPolicy = Literal["Never", "LowerPriority", "Any"]
BorrowWithinPolicy = Literal["Never", "LowerPriority"]
FairSharingStrategy = Literal["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
#: Kueue's default ``preemptionStrategies``
DEFAULT_STRATEGIES: tuple[FairSharingStrategy, ...] = (
    "LessThanOrEqualToFinalShare",
    "LessThanInitialShare",
)
Outcome = Literal["admit", "preempt", "pending"]
#: what a workload is (docs/workloads.md): a training job, a notebook instance, or one
#: replica of an inference service (a service is admitted replica by replica)
WorkloadClass = Literal["job", "notebook", "service"]
Reason = Literal["WithinQuota", "Reclaim", "ReclaimWhileBorrowing", "FairSharing"]


class DispatchError(Invalid):
    """A snapshot that cannot be decided on (unknown quota, a cycle, a job on an inner node)."""


@dataclass(frozen=True)
class BorrowWithin:
    """Kueue's ``borrowWithinCohort``: preempt in other quotas while still borrowing,
    only workloads of priority at most ``max_priority_threshold`` (and below the incoming's)."""

    policy: BorrowWithinPolicy = "Never"
    max_priority_threshold: int | None = None


@dataclass(frozen=True)
class Preemption:
    within_quota: WithinQuotaPolicy = "Never"
    reclaim: ReclaimPolicy = "Never"
    borrow_within: BorrowWithin = field(default_factory=BorrowWithin)


@dataclass(frozen=True)
class QuotaNode:
    """One quota. ``min`` of an inner node is its subtree's guarantee; ``None`` means the
    sum of its children's mins. A key missing from ``max`` has no cap of its own."""

    name: str
    parent: str | None = None
    min: Quantities | None = None
    max: Quantities = field(default_factory=dict)
    lend_limit: Quantities = field(default_factory=dict)
    preemption: Preemption = field(default_factory=Preemption)
    weight: float = 1.0


@dataclass(frozen=True)
class Admitted:
    job: str
    quota: str
    priority: int
    resources: Quantities
    admitted_at: datetime
    workspace: str = ""
    #: the job's ``billing_mode`` (events.BillingMode): ``idle`` jobs are reclaimed first
    billing_mode: str = "public"
    #: ``job`` (training), ``notebook``, or ``service`` (one replica): a workload is never
    #: the victim of a preemptor of a lower class (:func:`ledger.dispatch.workloads.may_take`)
    workload: WorkloadClass = "job"


@dataclass(frozen=True)
class Incoming:
    job: str
    quota: str
    priority: int
    resources: Quantities
    created_at: datetime
    workspace: str = ""
    billing_mode: str = "public"
    #: ``notebook``: admitted or refused at once, never queued (plan_cycle)
    workload: WorkloadClass = "job"
    #: a service replica that may spill over (``dlc.ledger/spillover: public``): when it
    #: does not fit its quota and preempts nothing, it is admitted on public resources,
    #: outside the quota (:attr:`Decision.spillover`), instead of waiting
    spillover: bool = False

    def admitted(self, at: datetime) -> Admitted:
        """This job as admitted at ``at``."""
        return Admitted(
            self.job,
            self.quota,
            self.priority,
            self.resources,
            at,
            self.workspace,
            self.billing_mode,
            self.workload,
        )


@dataclass(frozen=True)
class Snapshot:
    quotas: tuple[QuotaNode, ...]
    admitted: tuple[Admitted, ...] = ()
    #: Kueue's fair sharing: candidates chosen across the tree by dominant resource share
    fair_sharing: bool = False
    strategies: tuple[FairSharingStrategy, ...] = DEFAULT_STRATEGIES


@dataclass(frozen=True)
class Victim:
    job: str
    reason: Reason


@dataclass(frozen=True)
class Decision:
    job: str
    outcome: Outcome
    victims: tuple[Victim, ...] = ()
    #: an admission on public resources, outside the quota (a spilled service replica):
    #: it counts against no quota, in this cycle or later ones
    spillover: bool = False

    def as_document(self) -> dict[str, object]:
        doc: dict[str, object] = {
            "job": self.job,
            "outcome": self.outcome,
            "victims": [{"job": v.job, "reason": v.reason} for v in self.victims],
        }
        if self.spillover:
            doc["spillover"] = True
        return doc
