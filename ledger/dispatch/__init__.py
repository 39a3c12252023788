"""The dispatcher's decisions, with no IO: plain data in (a quota-tree snapshot, the
admitted workloads, one incoming workload), a decision out.

- :mod:`~ledger.dispatch.model`: the snapshot's dataclasses and the decision;
- :mod:`~ledger.dispatch.capacity`: Kueue's hierarchical capacity (``available``, borrowing);
- :mod:`~ledger.dispatch.preemption`: Kueue's classical preemption (candidates, ordering,
  greedy removal, fill-back);
- :mod:`~ledger.dispatch.cycle`: one cycle over the pending queue (:func:`plan_cycle`);
- :mod:`~ledger.dispatch.trees`: the applied quota tree as the core's inputs
  (:func:`dispatch_config`).
"""

from ledger.dispatch.cycle import (
    CycleInput,
    CycleResult,
    PendingReason,
    PendingStatus,
    QueuePolicyName,
    QueueSettings,
    plan_cycle,
)
from ledger.dispatch.model import (
    Admitted,
    BorrowWithin,
    Decision,
    DispatchError,
    Incoming,
    Preemption,
    QuotaNode,
    Snapshot,
    Victim,
)
from ledger.dispatch.preemption import decide
from ledger.dispatch.trees import DispatchConfig, dispatch_config

__all__ = [
    "Admitted",
    "BorrowWithin",
    "CycleInput",
    "CycleResult",
    "Decision",
    "DispatchConfig",
    "DispatchError",
    "Incoming",
    "PendingReason",
    "PendingStatus",
    "Preemption",
    "QueuePolicyName",
    "QueueSettings",
    "QuotaNode",
    "Snapshot",
    "Victim",
    "decide",
    "dispatch_config",
    "plan_cycle",
]
