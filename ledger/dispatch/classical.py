"""Kueue's classical preemption with hierarchical cohorts
(``pkg/scheduler/preemption/classical`` and ``classicalPreemptions`` in ``preemption.go``).

Candidates come in three groups, each in :func:`~ledger.dispatch.candidates.order_key` order:

1. *hierarchy* candidates: in quotas outside the incoming's, below an ancestor whose
   subtree quota the incoming fits in (counting from its own quota upwards) — it has a
   better claim on that capacity, so their priority only has to satisfy ``reclaim``
   (reason ``Reclaim``);
2. *priority* candidates: the other borrowers; ``Reclaim`` if they may only be taken when
   the incoming will not borrow (no ``borrow_within``, or priority above its threshold),
   else ``ReclaimWhileBorrowing``;
3. the incoming's own quota, per ``within_quota`` (``WithinQuota``).

Only subtrees above their quota are searched; a candidate stays valid while its quota
and every ancestor below the lowest common ancestor with the incoming still borrow.
Greedy removal in that order until the incoming fits, then fill-back; tried allowing the
incoming to borrow and not, in Kueue's order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

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
from ledger.dispatch.model import Admitted, Incoming, Reason

__all__ = ["classical_targets"]

Variant = Literal["WithinCQ", "Hierarchical", "ReclaimWithoutBorrowing", "ReclaimWhileBorrowing"]

_REASONS: dict[Variant, Reason] = {
    "WithinCQ": "WithinQuota",
    "Hierarchical": "Reclaim",
    "ReclaimWithoutBorrowing": "Reclaim",
    "ReclaimWhileBorrowing": "ReclaimWhileBorrowing",
}


@dataclass(frozen=True)
class _Candidate:
    workload: Admitted
    #: the lowest common ancestor of the candidate's quota and the incoming's
    lca: str | None
    variant: Variant


def _borrow_within(tree: Tree, quota: str) -> tuple[bool, int | None]:
    """(borrowing within the cohort is forbidden, the priority threshold)."""
    bw = tree.nodes[quota].preemption.borrow_within
    if bw.policy == "Never":
        return True, None
    return False, bw.max_priority_threshold


def _classify(
    tree: Tree, incoming: Incoming, wl: Admitted, keys: set[str], advantage: bool
) -> Variant | None:
    if not uses_keys(wl, keys):
        return None
    policy = tree.nodes[incoming.quota].preemption
    if wl.quota == incoming.quota:
        return "WithinCQ" if satisfies_policy(policy.within_quota, incoming, wl) else None
    if not satisfies_policy(policy.reclaim, incoming, wl):
        return None
    if advantage:
        return "Hierarchical"
    forbidden, threshold = _borrow_within(tree, incoming.quota)
    if forbidden:
        return "ReclaimWithoutBorrowing"
    if wl.priority >= incoming.priority or (threshold is not None and wl.priority > threshold):
        return "ReclaimWithoutBorrowing"
    return "ReclaimWhileBorrowing"


def _from_quota(
    tree: Tree,
    by_quota: ByQuota,
    quota: str,
    lca: str | None,
    incoming: Incoming,
    keys: set[str],
    advantage: bool,
) -> list[_Candidate]:
    out: list[_Candidate] = []
    for wl in by_quota.get(quota, {}).values():
        variant = _classify(tree, incoming, wl, keys, advantage)
        if variant is not None:
            out.append(_Candidate(wl, lca, variant))
    return out


def _in_subtree(
    tree: Tree,
    by_quota: ByQuota,
    node: str,
    subtree_root: str,
    skip: str | None,
    incoming: Incoming,
    keys: set[str],
    advantage: bool,
    out: list[_Candidate],
) -> None:
    """Kueue's ``collectCandidatesInSubtree``: descend only into nodes above their quota."""
    for child in tree.children[node]:
        if child == skip or child == incoming.quota:
            continue
        if tree.within_nominal(child, keys):
            continue
        if tree.is_leaf(child):
            out.extend(_from_quota(tree, by_quota, child, subtree_root, incoming, keys, advantage))
        else:
            _in_subtree(tree, by_quota, child, subtree_root, skip, incoming, keys, advantage, out)


def _collect(
    tree: Tree,
    by_quota: ByQuota,
    incoming: Incoming,
    request: Mapping[str, float],
    keys: set[str],
) -> tuple[list[_Candidate], list[_Candidate], list[_Candidate]]:
    """(hierarchy, priority, own-quota) candidates, each sorted."""
    own: list[_Candidate] = []
    policy = tree.nodes[incoming.quota].preemption
    if policy.within_quota != "Never":
        own = _from_quota(tree, by_quota, incoming.quota, None, incoming, keys, False)
    hierarchy: list[_Candidate] = []
    priority: list[_Candidate] = []
    parent = tree.nodes[incoming.quota].parent
    if parent is not None and policy.reclaim != "Never":
        advantage, remaining = tree.fit_in_quota(incoming.quota, request)
        previous: str | None = None
        for ancestor in tree.ancestry(incoming.quota)[1:]:
            target = hierarchy if advantage else priority
            _in_subtree(
                tree, by_quota, ancestor, ancestor, previous, incoming, keys, advantage, target
            )
            fits, remaining = tree.fit_in_quota(ancestor, remaining)
            advantage = advantage or fits
            previous = ancestor
    key = lambda c: order_key(incoming.quota, c.workload)  # noqa: E731
    return sorted(hierarchy, key=key), sorted(priority, key=key), sorted(own, key=key)


def _valid(tree: Tree, incoming: Incoming, c: _Candidate, keys: set[str], borrow: bool) -> bool:
    """Kueue's ``candidateIsValid``, against the tree as removals change it."""
    if c.workload.quota == incoming.quota:
        return True
    if borrow and c.variant == "ReclaimWithoutBorrowing":
        return False
    for node in tree.ancestry(c.workload.quota):
        if node == c.lca:
            break
        if tree.within_nominal(node, keys):
            return False
    return True


def classical_targets(
    tree: Tree,
    by_quota: ByQuota,
    incoming: Incoming,
    request: Mapping[str, float],
    keys: set[str],
) -> list[Target]:
    """The victims for ``incoming`` (``[]``: none found); ``tree`` is left as given."""
    hierarchy, priority, own = _collect(tree, by_quota, incoming, request, keys)
    candidates = hierarchy + priority + own
    forbidden, _ = _borrow_within(tree, incoming.quota)
    quota = incoming.quota
    under_min = all(tree.usage(quota, k) < tree.min(quota, k) for k in keys)
    if (not hierarchy and not priority) or (forbidden and not under_min):
        attempts = [True]
    elif forbidden and not hierarchy:
        attempts = [False, True]
    else:
        attempts = [True, False]
    for borrow in attempts:
        removed: list[Target] = []
        for c in candidates:
            if not _valid(tree, incoming, c, keys, borrow):
                continue
            tree.remove(c.workload.quota, c.workload.resources)
            removed.append(Target(c.workload, _REASONS[c.variant]))
            if workload_fits(tree, quota, request, allow_borrowing=borrow):
                kept = fill_back(tree, quota, request, removed, allow_borrowing=borrow)
                for t in kept:
                    tree.add(t.workload.quota, t.workload.resources)
                return kept
        for t in removed:
            tree.add(t.workload.quota, t.workload.resources)
    return []
