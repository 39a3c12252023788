"""One decision, as Kueue's scheduler takes it for one workload (flavor assignment,
``pkg/scheduler/flavorassigner``; then ``Preemptor.GetTargets``), plus the platform's idle mode.

1. A key whose request exceeds what the quota could ever get (``potentialAvailable``:
   its guarantee and its parent's, within the ``max`` on the path) → ``pending``.
2. Every key fits ``available`` → ``admit``.
3. A key that does not fit may be preempted for only when the request is within the
   quota's ``min``, or fits within the quota of a non-root ancestor (hierarchical
   reclaim), or ``borrow_within`` is set (or fair sharing with ``reclaim``), and when a
   preemption for that key alone finds victims; otherwise ``pending``.
4. The victims for all keys that do not fit: classical (:mod:`~ledger.dispatch.classical`)
   or fair sharing (:mod:`~ledger.dispatch.fair_sharing`). None → ``pending``.

Idle mode (``billing_mode == "idle"``): an idle job only uses idle capacity — it is
admitted beyond its quota's own ``max`` (the root and the ancestors still bound it) and
never preempts. A non-idle job takes idle jobs of its tree first, whatever the
policies and priorities (reason ``Reclaim``, ``WithinQuota`` in its own quota); only
when they are not enough does it go on to the regular candidates.

Child-level preemption (the platform's; :mod:`~ledger.dispatch.workloads`): a workload on
an inner quota's own leaf, when the quota's ``reclaim`` is not ``Never``, takes back
what the training jobs of the quota's other leaves borrow beyond their ``min``: those
jobs its ``reclaim`` allows, other quotas' borrowers in Kueue's candidate order (lower
priority first, most recently admitted first), each only while its leaf still borrows,
then fill-back (reason ``Reclaim``). Only when that finds nothing do Kueue's rules follow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ledger.dispatch.candidates import (
    ByQuota,
    Target,
    fill_back,
    order_key,
    satisfies_policy,
    uses_keys,
    workload_fits,
)
from ledger.dispatch.capacity import Tree
from ledger.dispatch.classical import classical_targets
from ledger.dispatch.fair_sharing import fair_targets
from ledger.dispatch.model import (
    Admitted,
    Decision,
    DispatchError,
    FairSharingStrategy,
    Incoming,
    Snapshot,
    Victim,
)
from ledger.dispatch.victim_index import VictimIndex
from ledger.dispatch.workloads import is_own_leaf, may_take, moved, place, public_quota

__all__ = ["IDLE", "Decider", "decide"]

#: the billing mode of jobs that borrow idle capacity beyond their quota and go first
IDLE = "idle"


def decide(snapshot: Snapshot, incoming: Incoming) -> Decision:
    """The decision for ``incoming`` given ``snapshot`` (pure: the snapshot is not changed).
    Workloads on an inner quota run on its own leaf (:mod:`~ledger.dispatch.workloads`)."""
    quotas, inner = place(snapshot.quotas, (*snapshot.admitted, incoming))
    if inner:
        snapshot = Snapshot(
            quotas,
            tuple(moved(wl, inner) for wl in snapshot.admitted),
            snapshot.fair_sharing,
            snapshot.strategies,
        )
        incoming = moved(incoming, inner)
    return Decider(snapshot).decide(incoming)


class Decider:
    """Decisions against one snapshot as it changes (a cycle: admissions, preemptions):
    the tree and the per-quota index are built once and kept in step by :meth:`admit`
    and :meth:`evict`, so a decision costs what its candidates cost, not the size of the
    admitted set. :meth:`decide` leaves the state as it found it.

    ``fast=False`` decides without the :class:`~ledger.dispatch.victim_index.VictimIndex`
    shortcuts (Kueue's search as written, every candidate collected and sorted): the
    same decisions, kept callable to test that they are."""

    def __init__(self, snapshot: Snapshot, *, fast: bool = True) -> None:
        self.fast = fast
        self.fair_sharing = snapshot.fair_sharing
        self.strategies = snapshot.strategies
        self.tree = Tree(snapshot.quotas, ())
        self._jobs: dict[str, Admitted] = {}
        #: regular jobs by quota, idle jobs by the root of their tree
        self._idle: dict[str, dict[str, Admitted]] = {}
        # counted into the tree once per leaf (the same usage as one add per workload:
        # Kueue's addUsage of non-negative amounts adds up), indexed in one tight pass:
        # this is per admitted job and per cycle
        totals: dict[str, dict[str, float]] = {}
        groups: dict[str, dict[str, Admitted]] = {}
        jobs, nodes = self._jobs, self.tree.nodes
        for wl in snapshot.admitted:
            job, quota = wl.job, wl.quota
            if job in jobs:
                raise DispatchError(f"job {job!r} is admitted twice")
            if quota not in nodes:
                raise DispatchError(f"unknown quota {quota!r}")
            jobs[job] = wl
            if wl.billing_mode == IDLE:
                self._idle.setdefault(self.tree.root(quota), {})[job] = wl
            else:
                group = groups.get(quota)
                if group is None:
                    group = groups[quota] = {}
                group[job] = wl
            total = totals.get(quota)
            if total is None:
                total = totals[quota] = {}
            for k, v in wl.resources.items():
                total[k] = total.get(k, 0) + v
        self._by_quota = VictimIndex(groups)
        for quota, total in totals.items():
            self.tree.add(quota, total)

    @property
    def victim_index(self) -> VictimIndex:
        """The admitted non-idle jobs by quota, as the victim search reads them."""
        return self._by_quota

    @property
    def admitted(self) -> tuple[Admitted, ...]:
        return tuple(self._jobs.values())

    def admit(self, wl: Admitted) -> None:
        """Count ``wl`` as running (a job name is admitted once)."""
        if wl.job in self._jobs:
            raise DispatchError(f"job {wl.job!r} is admitted twice")
        self.tree.add(wl.quota, wl.resources)
        self._index(wl)

    def _index(self, wl: Admitted) -> None:
        if wl.job in self._jobs:
            raise DispatchError(f"job {wl.job!r} is admitted twice")
        if wl.quota not in self.tree.nodes:
            raise DispatchError(f"unknown quota {wl.quota!r}")
        self._jobs[wl.job] = wl
        if wl.billing_mode == IDLE:
            self._idle.setdefault(self.tree.root(wl.quota), {})[wl.job] = wl
        else:
            self._by_quota.add(wl)

    def evict(self, job: str) -> Admitted:
        """Stop counting ``job`` (preempted or finished); returns it."""
        wl = self._jobs.pop(job)
        self.tree.remove(wl.quota, wl.resources)
        if wl.billing_mode == IDLE:
            del self._idle[self.tree.root(wl.quota)][job]
        else:
            self._by_quota.remove(wl)
        return wl

    def decide(self, incoming: Incoming) -> Decision:
        tree = self.tree
        quota = incoming.quota
        tree.ancestry(quota)
        if not tree.is_leaf(quota):
            raise DispatchError(f"quota {quota!r} has children: only leaf quotas run jobs")
        request = {k: v for k, v in incoming.resources.items() if v > 0}
        if incoming.billing_mode == IDLE:
            fits = tree.fits(quota, request, own_cap=False)
            return Decision(incoming.job, "admit" if fits else "pending")
        if any(v > tree.potential_available(quota, k) for k, v in request.items()):
            return Decision(incoming.job, "pending")
        if tree.fits(quota, request):
            return Decision(incoming.job, "admit")
        short = tree.keys_short(quota, request)
        idle = sorted(
            (
                wl
                for wl in self._idle.get(tree.root(quota), {}).values()
                if uses_keys(wl, short) and may_take(incoming.workload, wl.workload)
            ),
            key=lambda wl: order_key(quota, wl),
        )
        targets = self._targets(incoming, request, idle)
        # the tree holds the targets' removal: give their usage back
        for t in targets:
            tree.add(t.workload.quota, t.workload.resources)
        if not targets:
            return Decision(incoming.job, "pending")
        victims = tuple(Victim(t.workload.job, t.reason) for t in targets)
        return Decision(incoming.job, "preempt", victims)

    def _targets(
        self, incoming: Incoming, request: Mapping[str, float], idle: list[Admitted]
    ) -> list[Target]:
        """The victims, removed from the tree (``[]``: the tree is as it was)."""
        tree, quota = self.tree, incoming.quota
        removed: list[Target] = []
        for wl in idle:
            tree.remove(wl.quota, wl.resources)
            removed.append(Target(wl, "WithinQuota" if wl.quota == quota else "Reclaim"))
            if workload_fits(tree, quota, request, allow_borrowing=True):
                return fill_back(tree, quota, request, removed, allow_borrowing=True)
        found = _child_level(
            tree, self._by_quota, incoming, request, tree.keys_short(quota, request)
        )
        if found:
            for t in found:
                tree.remove(t.workload.quota, t.workload.resources)
            return found + _give_back(tree, quota, request, removed)
        found = _regular(
            tree,
            self.fair_sharing,
            self.strategies,
            self._by_quota,
            incoming,
            request,
            self._by_quota if self.fast else None,
        )
        if not found:
            for t in removed:
                tree.add(t.workload.quota, t.workload.resources)
            return []
        for t in found:
            tree.remove(t.workload.quota, t.workload.resources)
        return found + _give_back(tree, quota, request, removed)


def _child_level(
    tree: Tree,
    by_quota: ByQuota,
    incoming: Incoming,
    request: Mapping[str, float],
    keys: set[str],
) -> list[Target]:
    """The platform's child-level preemption (module docstring): the victims among the
    training jobs its children borrow with, for a workload on an inner quota's own leaf
    (``[]``: none, or not such a workload); ``tree`` is left as given."""
    quota = incoming.quota
    node = tree.nodes[quota]
    policy = node.preemption.reclaim
    if not is_own_leaf(quota) or node.parent is None or policy == "Never":
        return []
    candidates = [
        wl
        for leaf in tree.leaves(node.parent)
        if leaf != quota
        for wl in by_quota.get(leaf, {}).values()
        if wl.workload == "job" and uses_keys(wl, keys) and satisfies_policy(policy, incoming, wl)
    ]
    candidates.sort(key=lambda wl: order_key(quota, wl))
    removed: list[Target] = []
    for wl in candidates:
        # only what a leaf borrows beyond its min: valid while it still borrows a key it uses
        if not any(tree.is_borrowing(wl.quota, k) for k in keys if wl.resources.get(k, 0) > 0):
            continue
        tree.remove(wl.quota, wl.resources)
        removed.append(Target(wl, "Reclaim"))
        if workload_fits(tree, quota, request, allow_borrowing=True):
            kept = fill_back(tree, quota, request, removed, allow_borrowing=True)
            for t in kept:
                tree.add(t.workload.quota, t.workload.resources)
            return kept
    for t in removed:
        tree.add(t.workload.quota, t.workload.resources)
    return []


def _give_back(
    tree: Tree, quota: str, request: Mapping[str, float], idle: list[Target]
) -> list[Target]:
    """The idle victims still needed once the regular victims are gone (newest first back)."""
    kept = list(idle)
    for i in range(len(kept) - 1, -1, -1):
        wl = kept[i].workload
        tree.add(wl.quota, wl.resources)
        if workload_fits(tree, quota, request, allow_borrowing=True):
            kept.pop(i)
        else:
            tree.remove(wl.quota, wl.resources)
    return kept


def _regular(
    tree: Tree,
    fair_sharing: bool,
    strategies: Sequence[FairSharingStrategy],
    by_quota: ByQuota,
    incoming: Incoming,
    request: Mapping[str, float],
    index: VictimIndex | None,
) -> list[Target]:
    """Kueue's flavor assignment in preemption mode, then ``GetTargets``."""
    quota = incoming.quota
    short = tree.keys_short(quota, request)
    policy = tree.nodes[quota].preemption
    while_borrowing = policy.borrow_within.policy != "Never" or (
        fair_sharing and policy.reclaim != "Never"
    )
    for k in sorted(short):
        v = request[k]
        if not (
            tree.min(quota, k) >= v
            # an own leaf's workloads may preempt within the guarantee of their quota
            or (is_own_leaf(quota) and tree.min(public_quota(quota), k) >= v)
            or _may_reclaim_in_hierarchy(tree, quota, k, v)
            or while_borrowing
        ):
            return []
        # only whether this key alone finds victims counts here
        if not _targets(
            tree, fair_sharing, strategies, by_quota, incoming, {k: v}, {k}, index, fill=False
        ):
            return []
    return _targets(tree, fair_sharing, strategies, by_quota, incoming, request, short, index)


def _may_reclaim_in_hierarchy(tree: Tree, quota: str, key: str, value: float) -> bool:
    """Kueue's ``FindHeightOfLowestSubtreeThatFits``: the request fits within the quota of
    some ancestor below the root."""
    parent = tree.nodes[quota].parent
    if parent is None or not tree.borrowing_with(quota, key, value):
        return parent is not None
    remaining = value - tree.local_available(quota, key)
    for node in tree.ancestry(quota)[1:]:
        if not tree.borrowing_with(node, key, remaining):
            return tree.nodes[node].parent is not None
        remaining -= tree.local_available(node, key)
    return False


def _targets(
    tree: Tree,
    fair_sharing: bool,
    strategies: Sequence[FairSharingStrategy],
    by_quota: ByQuota,
    incoming: Incoming,
    request: Mapping[str, float],
    keys: set[str],
    index: VictimIndex | None,
    *,
    fill: bool = True,
) -> list[Target]:
    if fair_sharing:
        return fair_targets(tree, by_quota, incoming, request, keys, strategies)
    return classical_targets(tree, by_quota, incoming, request, keys, index, fill=fill)
