"""Kueue's fair-sharing preemption (``fairPreemptions`` in ``preemption.go`` and
``pkg/scheduler/preemption/fairsharing``), when a snapshot enables fair sharing.

Candidates: the incoming's own quota per ``within_quota``; every other leaf of the tree
that borrows in a contested key, per ``reclaim``. With the incoming's request counted in
its quota, the tree is walked from the root to the child with the highest dominant
resource share (:mod:`~ledger.dispatch.shares`) that still borrows and has candidates,
down to a quota; its next candidate is taken:

- in the incoming's own quota: always (``WithinQuota``);
- while the incoming's quota stays within its ``min`` in the contested keys: always
  (``Reclaim``; Kueue's ``FairSharingPreemptWithinNominal``, on by default);
- otherwise when the first strategy holds between the shares of the two children of the
  lowest common ancestor (``FairSharing``): ``LessThanOrEqualToFinalShare`` — the
  preemptor's share after admission is at most the target's after the removal;
  ``LessThanInitialShare`` — below the target's before it. With a second strategy,
  the candidates that failed are retried, one per quota, with ``LessThanInitialShare``
  (Kueue's API allows no other second strategy, and its code applies that one).

Then fill-back, as classical preemption.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

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
from ledger.dispatch.model import Admitted, FairSharingStrategy, Incoming
from ledger.dispatch.shares import Share, share

__all__ = ["fair_targets"]

_NEGATIVE = Share(1.0, -1.0)


def _compare(a: Share, b: Share) -> int:
    """Kueue's ``CompareDRS``."""
    ka, kb = a.sort_key, b.sort_key
    return (ka > kb) - (ka < kb)


def _passes(strategy: FairSharingStrategy, preemptor: Share, old: Share, new: Share) -> bool:
    if strategy == "LessThanOrEqualToFinalShare":
        return _compare(preemptor, new) <= 0
    return _compare(preemptor, old) < 0


class _Ordering:
    """Kueue's ``TargetClusterQueueOrdering``: which quota yields the next candidate."""

    def __init__(self, tree: Tree, incoming: Incoming, candidates: Sequence[Admitted]) -> None:
        self.tree = tree
        self.incoming = incoming
        self.preemptor = incoming.quota
        self.path = set(tree.ancestry(self.preemptor)[1:])
        self.queue: dict[str, list[Admitted]] = {}
        for wl in candidates:
            self.queue.setdefault(wl.quota, []).append(wl)
        self.pruned: set[str] = set()

    def has_workload(self, quota: str) -> bool:
        return bool(self.queue.get(quota))

    def pop(self, quota: str) -> Admitted:
        return self.queue[quota].pop(0)

    def drop(self, quota: str) -> None:
        self.pruned.add(quota)

    def __iter__(self) -> Iterator[str]:
        parent = self.tree.nodes[self.preemptor].parent
        if parent is None:
            while self.preemptor not in self.pruned and self.has_workload(self.preemptor):
                yield self.preemptor
            return
        root = self.tree.root(self.preemptor)
        while root not in self.pruned:
            quota = self._next(root)
            if quota is not None:
                yield quota

    def _next(self, node: str) -> str | None:
        tree = self.tree
        best_leaf: str | None = None
        best_leaf_share = _NEGATIVE
        best_inner: str | None = None
        best_inner_share = _NEGATIVE
        for child in tree.children[node]:
            if child in self.pruned:
                continue
            drs = share(tree, child)
            if tree.is_leaf(child):
                if (not drs.borrowing and child != self.preemptor) or not self.has_workload(child):
                    self.pruned.add(child)
                    continue
                cmp = _compare(drs, best_leaf_share)
                if cmp == 0 and best_leaf is not None:
                    new = order_key(self.preemptor, self.queue[child][0])
                    current = order_key(self.preemptor, self.queue[best_leaf][0])
                    if new < current:
                        best_leaf = child
                elif cmp > 0:
                    best_leaf, best_leaf_share = child, drs
            elif not drs.borrowing and child not in self.path:
                self.pruned.add(child)
            elif _compare(drs, best_inner_share) >= 0:
                best_inner, best_inner_share = child, drs
        if best_inner is None and best_leaf is None:
            self.pruned.add(node)
            return None
        if best_inner is not None and _compare(best_inner_share, best_leaf_share) >= 0:
            return self._next(best_inner)
        return best_leaf

    def almost_lcas(self, target: str) -> tuple[str, str]:
        """The children of the lowest common ancestor on the preemptor's and the
        target's paths (either may be the quota itself)."""
        target_path = self.tree.ancestry(target)
        lca = next(a for a in target_path[1:] if a in self.path)
        return _below(self.tree.ancestry(self.preemptor), lca), _below(target_path, lca)

    def shares(self, target: str) -> tuple[Share, Share]:
        mine, theirs = self.almost_lcas(target)
        return share(self.tree, mine), share(self.tree, theirs)

    def share_after_removal(self, target: str, wl: Admitted) -> Share:
        self.tree.remove(wl.quota, wl.resources)
        try:
            return share(self.tree, self.almost_lcas(target)[1])
        finally:
            self.tree.add(wl.quota, wl.resources)


def _below(path: list[str], lca: str) -> str:
    return path[path.index(lca) - 1]


def _candidates(
    tree: Tree,
    by_quota: ByQuota,
    incoming: Incoming,
    keys: set[str],
) -> list[Admitted]:
    """Kueue's ``findCandidates``."""
    policy = tree.nodes[incoming.quota].preemption
    found: list[Admitted] = []
    if policy.within_quota != "Never":
        found.extend(
            wl
            for wl in by_quota.get(incoming.quota, {}).values()
            if satisfies_policy(policy.within_quota, incoming, wl) and uses_keys(wl, keys)
        )
    if tree.nodes[incoming.quota].parent is not None and policy.reclaim != "Never":
        for leaf in tree.leaves(tree.root(incoming.quota)):
            if leaf == incoming.quota or not any(tree.borrowing_with(leaf, k) for k in keys):
                continue
            found.extend(
                wl
                for wl in by_quota.get(leaf, {}).values()
                if satisfies_policy(policy.reclaim, incoming, wl) and uses_keys(wl, keys)
            )
    found.sort(key=lambda wl: order_key(incoming.quota, wl))
    return found


class _Run:
    """One fair-sharing search; the incoming's request is counted in its quota."""

    def __init__(self, tree: Tree, incoming: Incoming, request: Mapping[str, float]) -> None:
        self.tree = tree
        self.incoming = incoming
        self.request = request
        self.targets: list[Target] = []

    def fits(self) -> bool:
        quota = self.incoming.quota
        self.tree.remove(quota, self.request)
        try:
            return workload_fits(self.tree, quota, self.request, allow_borrowing=True)
        finally:
            self.tree.add(quota, self.request)

    def take(self, wl: Admitted, target: Target) -> bool:
        self.tree.remove(wl.quota, wl.resources)
        self.targets.append(target)
        return self.fits()

    def first(
        self, candidates: list[Admitted], keys: set[str], strategy: FairSharingStrategy
    ) -> tuple[bool, list[Admitted]]:
        tree, quota = self.tree, self.incoming.quota
        ordering = _Ordering(tree, self.incoming, candidates)
        retry: list[Admitted] = []
        within_min = not any(tree.borrowing_with(quota, k) for k in keys)
        for target in ordering:
            if target == quota:
                wl = ordering.pop(target)
                if self.take(wl, Target(wl, "WithinQuota")):
                    return True, []
                continue
            if within_min:
                wl = ordering.pop(target)
                if self.take(wl, Target(wl, "Reclaim")):
                    return True, []
                continue
            preemptor_new, target_old = ordering.shares(target)
            if preemptor_new.value == float("inf") and target_old.value != float("inf"):
                while ordering.has_workload(target):
                    retry.append(ordering.pop(target))
                continue
            while ordering.has_workload(target):
                wl = ordering.pop(target)
                target_new = ordering.share_after_removal(target, wl)
                if _passes(strategy, preemptor_new, target_old, target_new):
                    if self.take(wl, Target(wl, "FairSharing")):
                        return True, []
                    break
                retry.append(wl)
        return False, retry

    def second(self, retry: list[Admitted]) -> bool:
        ordering = _Ordering(self.tree, self.incoming, retry)
        for target in ordering:
            preemptor_new, target_old = ordering.shares(target)
            wl = ordering.pop(target)
            if _compare(preemptor_new, target_old) < 0 and self.take(wl, Target(wl, "FairSharing")):
                return True
            ordering.drop(target)
        return False


def fair_targets(
    tree: Tree,
    by_quota: ByQuota,
    incoming: Incoming,
    request: Mapping[str, float],
    keys: set[str],
    strategies: Sequence[FairSharingStrategy],
) -> list[Target]:
    """The victims for ``incoming`` (``[]``: none found); ``tree`` is left as given."""
    candidates = _candidates(tree, by_quota, incoming, keys)
    if not candidates or not strategies:
        return []
    quota = incoming.quota
    tree.add(quota, request)
    run = _Run(tree, incoming, request)
    fits, retry = run.first(candidates, keys, strategies[0])
    if not fits and len(strategies) > 1:
        fits = run.second(retry)
    tree.remove(quota, request)
    if not fits:
        for t in run.targets:
            tree.add(t.workload.quota, t.workload.resources)
        return []
    kept = fill_back(tree, quota, request, run.targets, allow_borrowing=True)
    for t in kept:
        tree.add(t.workload.quota, t.workload.resources)
    return kept
