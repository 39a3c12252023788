"""Services and notebooks in the decision core (docs/dispatch.md, "Services and notebooks").

Three classes of workload draw on one quota tree (docs/workloads.md): training jobs
(``job``), notebook instances (``notebook``) and inference services (``service``). The core
sees them as it sees jobs, with three rules of their own:

- **a service is admitted replica by replica**: each replica (a LeaderWorkerSet's group of
  pods counts as one) is a unit of admission of its own, named :func:`replica_unit`, with
  one replica's resources; a scale-up's pending replicas queue and preempt one by one;
- **a class never preempts a higher one** (:func:`may_take`): training < notebook <
  service; a running replica is never the victim of a training job, whatever the policies;
- **a notebook is admitted or refused at once** (:func:`ledger.dispatch.cycle.plan_cycle`):
  interactive work never queues behind batch.

The platform binds inference to an *inner* quota (its integrated example: the services on
the parent, training and notebooks on the children). Kueue runs workloads on leaves only,
so an inner quota's own workloads run on a synthetic leaf below it, :func:`own_leaf`,
whose ``min`` is the quota's own pool (its ``min`` less its children's) and whose ``max``
and policies are the quota's: the tree's arithmetic is unchanged (the pool moves from the
node to its leaf), and the quota's ``reclaim`` policy on it is the platform's
*child-level preemption*: its workloads take back, by that policy's priority rule, what
the training jobs of its children borrow beyond their ``min``
(:func:`ledger.dispatch.preemption.Decider.decide`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

from ledger.dispatch.capacity import Tree
from ledger.dispatch.model import Admitted, Incoming, QuotaNode, WorkloadClass

__all__ = [
    "OWN_SUFFIX",
    "RANK",
    "SPILLOVER_REASON",
    "is_own_leaf",
    "may_take",
    "moved",
    "own_leaf",
    "place",
    "public_quota",
    "replica_unit",
    "unit_order",
    "unit_workload",
    "with_own_leaves",
]

#: a synthetic leaf's name: its quota's and this (``/`` is in no quota's name)
OWN_SUFFIX = "/own"
#: the order of the classes: a preemptor takes only victims of its class or below
RANK: Mapping[WorkloadClass, int] = {"job": 0, "notebook": 1, "service": 2}
#: the reason an admission decision on public resources (``Decision.spillover``) is
#: stored with: a service replica beyond its quota, outside it
SPILLOVER_REASON = "Spillover"
#: between a service's uid and a replica's index in a replica's unit name
_REPLICA_SEP = "#"

W = TypeVar("W", Admitted, Incoming)


def may_take(preemptor: WorkloadClass, victim: WorkloadClass) -> bool:
    """Whether a workload of class ``preemptor`` may ever preempt one of class ``victim``:
    training takes only training, a notebook training and notebooks, a service any."""
    return RANK[victim] <= RANK[preemptor]


def own_leaf(quota: str) -> str:
    """The synthetic leaf the workloads bound to inner quota ``quota`` run on."""
    return quota + OWN_SUFFIX


def is_own_leaf(name: str) -> bool:
    return name.endswith(OWN_SUFFIX)


def public_quota(name: str) -> str:
    """The quota a name of the core stands for (an own leaf: its inner quota)."""
    return name[: -len(OWN_SUFFIX)] if is_own_leaf(name) else name


def replica_unit(workload_uid: str, index: int) -> str:
    """The unit of admission of a service's replica ``index`` (0-based)."""
    return f"{workload_uid}{_REPLICA_SEP}{index}"


def unit_workload(unit: str) -> str:
    """The workload (or job) a unit of admission belongs to."""
    return unit.split(_REPLICA_SEP, 1)[0]


def unit_order(unit: str) -> tuple[str, int]:
    """A unit's place among equals in the victims' order: by its workload, then a service's
    highest replica first. A service's running replicas are its lowest indices (``#0`` ...
    ``#n-1``) and the actuator deletes its newest pod, so taking the highest index names the
    replica that goes: the unit named is gone once the pod is, and the loop sees its
    preemptor's victim released (a lower index would still stand, and be taken twice)."""
    workload, _, index = unit.partition(_REPLICA_SEP)
    return (workload, -int(index) if index.isdigit() else 0)


def with_own_leaves(quotas: Sequence[QuotaNode], inner: Collection[str]) -> tuple[QuotaNode, ...]:
    """``quotas`` with an own leaf right after each quota of ``inner`` (quotas with
    children that hold workloads of their own)."""
    if not inner:
        return tuple(quotas)
    tree = Tree(quotas, ())
    out: list[QuotaNode] = []
    for q in quotas:
        out.append(q)
        if q.name not in inner or tree.is_leaf(q.name):
            continue
        pool: dict[str, float] | None = None
        if q.min is not None:
            pool = {}
            for k in q.min:
                left = tree.min(q.name, k) - sum(tree.min(c, k) for c in tree.children[q.name])
                if left > 0:
                    pool[k] = left
        out.append(
            QuotaNode(
                name=own_leaf(q.name),
                parent=q.name,
                min=pool if pool is not None else {},
                max=dict(q.max),
                preemption=q.preemption,
                weight=q.weight,
            )
        )
    return tuple(out)


def place(
    quotas: Sequence[QuotaNode], workloads: Iterable[Admitted | Incoming]
) -> tuple[tuple[QuotaNode, ...], frozenset[str]]:
    """The tree with an own leaf for every inner quota some of ``workloads`` name, and
    those quotas."""
    parents = {q.parent for q in quotas if q.parent is not None}
    inner = frozenset(wl.quota for wl in workloads if wl.quota in parents)
    return with_own_leaves(quotas, inner), inner


def moved(wl: W, inner: Collection[str]) -> W:
    """``wl`` on its quota's own leaf when its quota is one of ``inner``."""
    return replace(wl, quota=own_leaf(wl.quota)) if wl.quota in inner else wl
