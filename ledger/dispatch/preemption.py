"""Kueue's classical preemption (pkg/scheduler/preemption), on the quota tree.

1. The incoming workload is admitted when it fits (:meth:`Tree.fits`).
2. Otherwise, candidates: workloads of its own quota allowed by ``within_quota``, and
   workloads of other quotas that are borrowing in a key needing preemption, allowed
   by ``reclaim`` (``LowerPriority``: strictly lower priority; ``Any``). Only workloads
   that use a key needing preemption are candidates.
3. Ordering: other quotas first, lower priority first, most recently admitted first.
4. As Kueue's ``GetTargets``: with only own-quota candidates, remove greedily allowing the
   incoming to borrow; with ``borrow_within`` set, allow borrowing but (when the incoming's
   quota is at or above its min) only take others' workloads below the threshold; else,
   when the incoming's quota is under its min, try without borrowing over all candidates,
   and finally own-quota candidates with borrowing.
5. Greedy removal until it fits, then fill-back in reverse order (a victim whose return
   still lets the incoming fit is kept running): a near-minimal victim set.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.dispatch.capacity import Tree
from ledger.dispatch.model import (
    Admitted,
    Decision,
    DispatchError,
    Incoming,
    Reason,
    Snapshot,
    Victim,
)

__all__ = ["decide"]


def decide(snapshot: Snapshot, incoming: Incoming) -> Decision:
    """The decision for ``incoming`` given ``snapshot`` (pure: the snapshot is not changed)."""
    tree = Tree(snapshot.quotas, snapshot.admitted)
    tree.ancestry(incoming.quota)
    if not tree.is_leaf(incoming.quota):
        raise DispatchError(f"quota {incoming.quota!r} has children: only leaf quotas run jobs")
    request = {k: v for k, v in incoming.resources.items() if v > 0}
    if tree.fits(incoming.quota, request):
        return Decision(incoming.job, "admit")
    short = tree.keys_short(incoming.quota, request)
    candidates = _candidates(tree, snapshot.admitted, incoming, short)
    targets = _targets(tree, incoming, request, short, candidates)
    if not targets:
        return Decision(incoming.job, "pending")
    victims = tuple(Victim(wl.job, _reason(tree, incoming, request, wl, targets)) for wl in targets)
    return Decision(incoming.job, "preempt", victims)


def _candidates(
    tree: Tree, admitted: Sequence[Admitted], incoming: Incoming, short: set[str]
) -> list[Admitted]:
    policy = tree.nodes[incoming.quota].preemption
    root = tree.ancestry(incoming.quota)[-1]
    found: list[Admitted] = []
    for wl in admitted:
        if not any(wl.resources.get(k, 0) > 0 for k in short):
            continue
        if wl.quota == incoming.quota:
            if _within_quota_allows(policy.within_quota, wl, incoming):
                found.append(wl)
            continue
        if policy.reclaim == "Never":
            continue
        if tree.ancestry(wl.quota)[-1] != root:  # another tree: never shares capacity
            continue
        if policy.reclaim == "LowerPriority" and wl.priority >= incoming.priority:
            continue
        if not any(tree.is_borrowing(wl.quota, k) for k in short):
            continue
        found.append(wl)
    # other quotas first, lower priority first, most recently admitted first
    found.sort(
        key=lambda wl: (
            wl.quota == incoming.quota,
            wl.priority,
            -wl.admitted_at.timestamp(),
            wl.job,
        )
    )
    return found


def _within_quota_allows(policy: str, wl: Admitted, incoming: Incoming) -> bool:
    if policy == "LowerPriority":
        return wl.priority < incoming.priority
    if policy == "LowerOrNewerEqualPriority":
        return wl.priority < incoming.priority or (
            wl.priority == incoming.priority and wl.admitted_at > incoming.created_at
        )
    return False


def _threshold(tree: Tree, incoming: Incoming) -> int | None:
    """Kueue's ``canBorrowWithinCohort``: others' workloads below this priority may be
    taken while the incoming still borrows; ``None`` when the policy is off."""
    bw = tree.nodes[incoming.quota].preemption.borrow_within
    if bw.policy != "LowerPriority":
        return None
    threshold = incoming.priority
    if bw.max_priority_threshold is not None and bw.max_priority_threshold < incoming.priority:
        threshold = bw.max_priority_threshold + 1
    return threshold


def _under_min(tree: Tree, quota: str, short: set[str]) -> bool:
    return all(tree.raw_usage(quota, k) < tree.min(quota, k) for k in short)


def _targets(
    tree: Tree,
    incoming: Incoming,
    request: dict[str, float],
    short: set[str],
    candidates: list[Admitted],
) -> list[Admitted]:
    own = [wl for wl in candidates if wl.quota == incoming.quota]
    if len(own) == len(candidates):
        return _minimal(tree, incoming, request, short, candidates, allow_borrowing=True)
    threshold = _threshold(tree, incoming)
    if threshold is not None:
        if not _under_min(tree, incoming.quota, short):
            candidates = [
                wl for wl in candidates if wl.quota == incoming.quota or wl.priority < threshold
            ]
        return _minimal(
            tree, incoming, request, short, candidates, allow_borrowing=True, threshold=threshold
        )
    if _under_min(tree, incoming.quota, short):
        found = _minimal(tree, incoming, request, short, candidates, allow_borrowing=False)
        if found:
            return found
    return _minimal(tree, incoming, request, short, own, allow_borrowing=True)


def _fits(tree: Tree, incoming: Incoming, request: dict[str, float], allow_borrowing: bool) -> bool:
    if not allow_borrowing and any(
        tree.is_borrowing(incoming.quota, k, extra=v) for k, v in request.items()
    ):
        return False
    return tree.fits(incoming.quota, request)


def _minimal(
    tree: Tree,
    incoming: Incoming,
    request: dict[str, float],
    short: set[str],
    candidates: list[Admitted],
    *,
    allow_borrowing: bool,
    threshold: int | None = None,
) -> list[Admitted]:
    """Greedy removal in candidate order, then fill-back; [] when nothing makes it fit.
    ``tree`` is restored before returning."""
    targets: list[Admitted] = []
    fits = False
    for wl in candidates:
        if wl.quota != incoming.quota:
            # re-checked after earlier removals: still borrowing?
            if not any(tree.is_borrowing(wl.quota, k) for k in short):
                continue
            if threshold is not None and wl.priority >= threshold:
                allow_borrowing = False
        tree.remove(wl.quota, wl.resources)
        targets.append(wl)
        if _fits(tree, incoming, request, allow_borrowing):
            fits = True
            break
    if not fits:
        for wl in targets:
            tree.add(wl.quota, wl.resources)
        return []
    # fill back: from the second-to-last removed down to the first
    for i in range(len(targets) - 2, -1, -1):
        wl = targets[i]
        tree.add(wl.quota, wl.resources)
        if _fits(tree, incoming, request, allow_borrowing):
            targets.pop(i)
        else:
            tree.remove(wl.quota, wl.resources)
    for wl in targets:
        tree.add(wl.quota, wl.resources)
    return targets


def _reason(
    tree: Tree,
    incoming: Incoming,
    request: dict[str, float],
    victim: Admitted,
    targets: list[Admitted],
) -> Reason:
    if victim.quota == incoming.quota:
        return "WithinQuota"
    # the state after the preemption and the admission
    for wl in targets:
        tree.remove(wl.quota, wl.resources)
    tree.add(incoming.quota, request)
    try:
        # Reclaim when some quota on the incoming's path, not containing the victim, is
        # within its min after admission; otherwise the incoming still borrows
        for node in tree.ancestry(incoming.quota):
            if tree.contains(node, victim.quota):
                break
            if not any(tree.is_borrowing(node, k) for k in request):
                return "Reclaim"
        return "ReclaimWhileBorrowing"
    finally:
        tree.remove(incoming.quota, request)
        for wl in targets:
            tree.add(wl.quota, wl.resources)
