"""The dispatcher's decisions, with no IO: plain data in (a quota-tree snapshot, the
admitted workloads, one incoming workload), a decision out.

- :mod:`~ledger.dispatch.model`: the snapshot's dataclasses and the decision;
- :mod:`~ledger.dispatch.capacity`: Kueue's hierarchical capacity (``available``, borrowing);
- :mod:`~ledger.dispatch.preemption`: :func:`decide`, one decision (Kueue's flavor
  assignment gate, then preemption; idle mode);
- :mod:`~ledger.dispatch.classical`: Kueue's classical preemption over hierarchical cohorts;
- :mod:`~ledger.dispatch.fair_sharing`: Kueue's fair-sharing preemption;
- :mod:`~ledger.dispatch.shares`: dominant resource share (fair-sharing order);
- :mod:`~ledger.dispatch.candidates`: policies, candidate order, fit check, fill-back;
- :mod:`~ledger.dispatch.cycle`: one cycle over the pending queue (:func:`plan_cycle`);
- :mod:`~ledger.dispatch.queues`: queue policies (order, which jobs a cycle tries);
- :mod:`~ledger.dispatch.trees`: the applied quota tree as the core's inputs
  (:func:`dispatch_config`);
- :mod:`~ledger.dispatch.workloads`: services (admitted replica by replica) and notebooks
  (admitted or refused at start), inner quotas' own leaves, child-level preemption.
"""

from ledger.dispatch.cycle import (
    CycleInput,
    CycleResult,
    PendingReason,
    PendingStatus,
    QueuePolicyName,
    QueueSettings,
    Refusal,
    RefusalReason,
    plan_cycle,
)
from ledger.dispatch.model import (
    DEFAULT_STRATEGIES,
    Admitted,
    BorrowWithin,
    Decision,
    DispatchError,
    FairSharingStrategy,
    Incoming,
    Preemption,
    QuotaNode,
    Snapshot,
    Victim,
    WorkloadClass,
)
from ledger.dispatch.preemption import IDLE, Decider, decide
from ledger.dispatch.shares import dominant_resource_share
from ledger.dispatch.trees import DispatchConfig, dispatch_config
from ledger.dispatch.workloads import may_take, own_leaf, public_quota, replica_unit, unit_workload

__all__ = [
    "DEFAULT_STRATEGIES",
    "IDLE",
    "Admitted",
    "BorrowWithin",
    "CycleInput",
    "CycleResult",
    "Decider",
    "Decision",
    "DispatchConfig",
    "DispatchError",
    "FairSharingStrategy",
    "Incoming",
    "PendingReason",
    "PendingStatus",
    "Preemption",
    "QueuePolicyName",
    "QueueSettings",
    "QuotaNode",
    "Refusal",
    "RefusalReason",
    "Snapshot",
    "Victim",
    "WorkloadClass",
    "decide",
    "dispatch_config",
    "dominant_resource_share",
    "may_take",
    "own_leaf",
    "plan_cycle",
    "public_quota",
    "replica_unit",
    "unit_workload",
]
