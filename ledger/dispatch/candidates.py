"""What Kueue's two preemption algorithms share (``pkg/scheduler/preemption/common`` and
``preemption.go``): the preemption policies, the candidate order, the fit check and the
fill-back that trims a victim set to a near-minimal one."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from ledger.dispatch.capacity import Tree
from ledger.dispatch.model import Admitted, Incoming, Reason
from ledger.dispatch.workloads import may_take, unit_order

__all__ = [
    "ByQuota",
    "Target",
    "fill_back",
    "order_key",
    "satisfies_policy",
    "uses_keys",
    "workload_fits",
]


#: admitted (non-idle) jobs by quota, then by job name
ByQuota = Mapping[str, Mapping[str, Admitted]]


@dataclass(frozen=True)
class Target:
    """A chosen victim and the reason Kueue records for it."""

    workload: Admitted
    reason: Reason


def satisfies_policy(policy: str, incoming: Incoming, candidate: Admitted) -> bool:
    """Kueue's ``SatisfiesPreemptionPolicy`` (``Never`` allows nothing), and never a
    victim of a higher class than the incoming's (a service's replica is never a training
    job's victim: :func:`~ledger.dispatch.workloads.may_take`)."""
    if not may_take(incoming.workload, candidate.workload):
        return False
    if policy == "LowerPriority":
        return candidate.priority < incoming.priority
    if policy == "LowerOrNewerEqualPriority":
        return candidate.priority < incoming.priority or (
            candidate.priority == incoming.priority and incoming.created_at < candidate.admitted_at
        )
    return policy == "Any"


def uses_keys(workload: Admitted, keys: Iterable[str]) -> bool:
    """Kueue's ``WorkloadUsesResources``: only workloads using a contested key are candidates."""
    return any(workload.resources.get(k, 0) > 0 for k in keys)


def order_key(incoming_quota: str, wl: Admitted) -> tuple[bool, int, float, tuple[str, int]]:
    """Kueue's ``CandidatesOrdering``: other quotas first, lower priority first, most
    recently admitted first, then by name (Kueue: by UID) for determinism, a service's
    highest replica first (:func:`~ledger.dispatch.workloads.unit_order`)."""
    return (
        wl.quota == incoming_quota,
        wl.priority,
        -wl.admitted_at.timestamp(),
        unit_order(wl.job),
    )


def workload_fits(
    tree: Tree, quota: str, request: Mapping[str, float], *, allow_borrowing: bool
) -> bool:
    """Kueue's ``workloadFits``: within ``available`` for every key, and, without
    borrowing, within the quota's ``min`` too."""
    for k, v in request.items():
        if not allow_borrowing and tree.borrowing_with(quota, k, v):
            return False
        if v > max(0.0, tree.available(quota, k)):
            return False
    return True


def fill_back(
    tree: Tree,
    quota: str,
    request: Mapping[str, float],
    targets: list[Target],
    *,
    allow_borrowing: bool,
    only: Collection[str] | None = None,
) -> list[Target]:
    """Kueue's ``fillBackWorkloads``: with every target removed from ``tree``, give back
    each one but the last (newest removal first) whose return still lets the incoming
    fit. The kept targets stay removed from ``tree``. With ``only``, just those keys of
    the targets' resources were removed, and only they are given back."""
    kept = list(targets)
    for i in range(len(kept) - 2, -1, -1):
        wl = kept[i].workload
        resources = (
            wl.resources if only is None else {k: v for k, v in wl.resources.items() if k in only}
        )
        tree.add_known(wl.quota, resources)
        if workload_fits(tree, quota, request, allow_borrowing=allow_borrowing):
            kept.pop(i)
        else:
            tree.remove(wl.quota, resources)
    return kept
