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

import heapq
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
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
from ledger.dispatch.victim_index import Entry, VictimIndex
from ledger.dispatch.workloads import RANK

__all__ = ["classical_targets", "surely_none"]

#: what the bound adds to every amount it frees, so that the float residue of the index's
#: running sums can never make it smaller than the exact sum
_SLACK = 1e-9

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
    # the policy first: it is the cheaper check and rules most workloads out
    policy = tree.nodes[incoming.quota].preemption
    if wl.quota == incoming.quota:
        if not satisfies_policy(policy.within_quota, incoming, wl):
            return None
        return "WithinCQ" if uses_keys(wl, keys) else None
    if not satisfies_policy(policy.reclaim, incoming, wl) or not uses_keys(wl, keys):
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
    return not _quota_returned(tree, c.workload.quota, c.lca, keys)


def _quota_returned(tree: Tree, quota: str, lca: str | None, keys: set[str]) -> bool:
    """The candidate's quota, or an ancestor below the common one (``lca``), no longer
    borrows: as removals only lower usage, no later candidate of that quota is valid
    either."""
    for node in tree.ancestry(quota):
        if node == lca:
            break
        if tree.within_nominal(node, keys):
            return True
    return False


class _Source:
    """One quota's candidates for one search: a prefix of its ordered jobs (those whose
    priority the policy may allow), classified as they are reached."""

    __slots__ = ("advantage", "end", "entries", "lca")

    def __init__(self, entries: Sequence[Entry], end: int, lca: str | None, advantage: bool):
        self.entries = entries
        self.end = end
        self.lca = lca
        self.advantage = advantage


def _sources(
    tree: Tree,
    index: VictimIndex,
    incoming: Incoming,
    request: Mapping[str, float],
    keys: set[str],
    with_priority: bool,
) -> tuple[list[_Source], list[_Source], list[_Source]]:
    """:func:`_collect`'s walk, the same quotas in the same groups, without their jobs
    (the priority group left empty unless ``with_priority``)."""
    quota = incoming.quota
    policy = tree.nodes[quota].preemption
    own: list[_Source] = []

    def source(leaf: str, lca: str | None, allows: str, advantage: bool) -> _Source | None:
        jobs = index.quotas.get(leaf)
        if jobs is None:
            return None
        end = jobs.allowed_end(allows, incoming.priority)
        return _Source(jobs.ordered(), end, lca, advantage) if end else None

    if policy.within_quota != "Never":
        s = source(quota, None, policy.within_quota, False)
        if s is not None:
            own.append(s)
    hierarchy: list[_Source] = []
    priority: list[_Source] = []
    if tree.nodes[quota].parent is not None and policy.reclaim != "Never":
        advantage, remaining = tree.fit_in_quota(quota, request)
        previous: str | None = None
        for ancestor in tree.ancestry(quota)[1:]:
            target = hierarchy if advantage else priority
            if advantage or with_priority:
                # source() inlined: this runs for every borrowing quota of every search
                quotas, allows, p = index.quotas, policy.reclaim, incoming.priority
                for leaf in tree.borrowing_leaves(ancestor, previous, keys):
                    jobs = quotas.get(leaf)
                    if jobs is None or leaf == quota:
                        continue
                    end = jobs.allowed_end(allows, p)
                    if end:
                        target.append(_Source(jobs.ordered(), end, ancestor, advantage))
            fits, remaining = tree.fit_in_quota(ancestor, remaining)
            advantage = advantage or fits
            previous = ancestor
    return hierarchy, priority, own


def _merged(
    tree: Tree,
    incoming: Incoming,
    keys: set[str],
    sources: list[_Source],
    returned: set[int],
    below: int | None = None,
) -> Iterator[tuple[Admitted, Variant, str | None, int]]:
    """The candidates of ``sources`` (with the index of their source) in Kueue's order
    (within one group the quota part of :func:`~ledger.dispatch.candidates.order_key` is
    the same for all), each quota's taken only as far as the search gets; a quota in
    ``returned`` (its candidates no longer valid) is dropped; with ``below``, only
    candidates of a lower priority."""
    ends = [
        s.end if below is None else min(s.end, bisect_left(s.entries, below, key=_priority))
        for s in sources
    ]
    heap = [(s.entries[0][0], i, 0) for i, s in enumerate(sources) if ends[i] > 0]
    heapq.heapify(heap)
    # _classify, knowing that a source's prefix already satisfies the priority part of
    # its policy (all but the admission time of an equal priority, for own candidates)
    quota, priority = incoming.quota, incoming.priority
    newer_equal = tree.nodes[quota].preemption.within_quota == "LowerOrNewerEqualPriority"
    forbidden, threshold = _borrow_within(tree, quota)
    contested = list(keys)
    # a higher class than the incoming's is never its victim (workloads.may_take)
    rank = RANK[incoming.workload]
    while heap:
        _, i, pos = heap[0]
        if i in returned:
            heapq.heappop(heap)
            continue
        s = sources[i]
        wl = s.entries[pos][1]
        if pos + 1 < ends[i]:
            heapq.heapreplace(heap, (s.entries[pos + 1][0], i, pos + 1))
        else:
            heapq.heappop(heap)
        if RANK[wl.workload] > rank:
            continue
        resources = wl.resources
        for k in contested:
            if resources.get(k, 0) > 0:
                break
        else:
            continue
        variant: Variant
        if wl.quota == quota:
            if newer_equal and wl.priority == priority and not incoming.created_at < wl.admitted_at:
                continue
            variant = "WithinCQ"
        elif s.advantage:
            variant = "Hierarchical"
        elif (
            forbidden
            or wl.priority >= priority
            or (threshold is not None and wl.priority > threshold)
        ):
            variant = "ReclaimWithoutBorrowing"
        else:
            variant = "ReclaimWhileBorrowing"
        yield wl, variant, s.lca, i


def _priority(entry: Entry) -> int:
    return entry[0][0]


def _any_candidate(tree: Tree, incoming: Incoming, keys: set[str], sources: list[_Source]) -> bool:
    return any(
        _classify(tree, incoming, entry[1], keys, s.advantage) is not None
        for s in sources
        for entry in s.entries[: s.end]
    )


def _lazy_targets(
    tree: Tree,
    index: VictimIndex,
    incoming: Incoming,
    request: Mapping[str, float],
    keys: set[str],
    fill: bool = True,
) -> list[Target]:
    """:func:`classical_targets`' search with its candidates generated in order as the
    greedy removal reaches them (same candidates, same order, same removals: the same
    victims); what it costs is the quotas searched and the candidates it removes."""
    forbidden, _ = _borrow_within(tree, incoming.quota)
    quota = incoming.quota
    under_min = all(tree.usage(quota, k) < tree.min(quota, k) for k in keys)
    # only borrowing is tried then, and it skips every priority candidate (all are
    # ReclaimWithoutBorrowing when borrowing within the cohort is forbidden)
    only_borrowing = forbidden and not under_min
    hierarchy, priority, own = _sources(
        tree, index, incoming, request, keys, with_priority=not only_borrowing
    )
    some_hierarchy = not only_borrowing and _any_candidate(tree, incoming, keys, hierarchy)
    if only_borrowing or (
        not some_hierarchy and not _any_candidate(tree, incoming, keys, priority)
    ):
        attempts = [True]
    elif forbidden and not some_hierarchy:
        attempts = [False, True]
    else:
        attempts = [True, False]
    _, threshold = _borrow_within(tree, quota)
    # allowed to borrow, the search skips ReclaimWithoutBorrowing candidates: in the
    # priority group, all of them when borrowing within the cohort is forbidden, else
    # those of the incoming's priority or above, or above the threshold
    below = incoming.priority if threshold is None else min(incoming.priority, threshold + 1)
    for borrow in attempts:
        # as (workload, variant): the Targets are made only for a search that fits
        removed: list[tuple[Admitted, Variant]] = []
        groups = [(hierarchy, None), (priority, below if borrow else None), (own, None)]
        if borrow and forbidden:
            groups.pop(1)
        # only the requested keys matter to the search (its fit and validity checks), and
        # the tree is put back exactly as it was, whatever the search removed
        checkpoint = tree.checkpoint(request)
        touched: set[str] = set()
        # the incoming's own max holds it back whatever other quotas free (their removals
        # leave its usage as it is): no fit is possible before its own quota's candidates
        # and allowed no borrowing, its own usage above its min holds it back alike
        capped = tree.capped(quota, request) or (
            not borrow and any(tree.borrowing_with(quota, k, v) for k, v in request.items())
        )
        try:
            for sources, limit in groups:
                returned: set[int] = set()
                check = sources is own or not capped
                for wl, variant, lca, i in _merged(tree, incoming, keys, sources, returned, limit):
                    if wl.quota != quota:
                        if borrow and variant == "ReclaimWithoutBorrowing":
                            continue
                        if _quota_returned(tree, wl.quota, lca, keys):
                            returned.add(i)
                            continue
                    if wl.quota not in touched:
                        touched.add(wl.quota)
                        tree.save(checkpoint, (wl.quota,))
                    tree.remove(wl.quota, {k: v for k, v in wl.resources.items() if k in request})
                    removed.append((wl, variant))
                    if check and workload_fits(tree, quota, request, allow_borrowing=borrow):
                        targets = [Target(w, _REASONS[v]) for w, v in removed]
                        if not fill:
                            return targets
                        return fill_back(
                            tree, quota, request, targets, allow_borrowing=borrow, only=request
                        )
        finally:
            tree.restore(checkpoint)
    return []


def surely_none(
    tree: Tree,
    index: VictimIndex,
    incoming: Incoming,
    request: Mapping[str, float],
    keys: set[str],
) -> bool:
    """True only when :func:`classical_targets` is sure to find no victims: even freeing,
    in every quota that could hold a candidate, the most the search could ever take there
    does not make ``request`` fit. Costs the searched quotas times their distinct
    priorities, not their jobs.

    Why it is an upper bound. Kueue's usage of a node is a function of the leaves' usage,
    non-decreasing in each (``addUsage`` stores in the parent only what exceeds a node's
    guarantee), and ``available`` is non-increasing in every node's usage; so removing
    more from any leaf never turns a fit into a misfit, and a fit allowing no borrowing
    is also a fit allowing it. The greedy removal checks the fit after removing a set
    ``R``; per leaf ``Q``, what ``R`` frees of each requested key is at most what is
    removed here:

    - in the incoming's quota: only jobs its ``within_quota`` allows, all of them at most
      (``LowerOrNewerEqualPriority``: all of the equal priority too);
    - elsewhere only candidates of the subtrees the search descends into (not within
      nominal, the incoming's ancestors aside), allowed by ``reclaim``: all of them at
      most; and when one key is searched, a candidate of ``Q`` is removed only while
      ``Q`` still borrows it (``candidateIsValid``; a leaf's usage is its jobs' sum), so
      what ``Q`` frees is below its borrowing when the search started plus its last
      removal, at most the largest job ``Q`` has had.

    So if removing these amounts leaves ``request`` unfit (borrowing allowed), no set the
    search removes fits, and it ends with no victims."""
    quota = incoming.quota
    policy = tree.nodes[quota].preemption
    freed: dict[str, dict[str, float]] = {}
    if policy.within_quota != "Never":
        own = index.quotas.get(quota)
        if own is not None:
            freed[quota] = own.summed(policy.within_quota, incoming.priority)
    if tree.nodes[quota].parent is not None and policy.reclaim != "Never":
        path = tree.ancestry(quota)
        single = next(iter(keys)) if len(keys) == 1 else None
        stack = [path[-1]]
        while stack:
            node = stack.pop()
            for child in tree.children[node]:
                if child == quota:
                    continue
                if child not in path and tree.within_nominal(child, keys):
                    continue
                if tree.children[child]:
                    stack.append(child)
                    continue
                jobs = index.quotas.get(child)
                if jobs is None:
                    continue
                amounts = jobs.summed(policy.reclaim, incoming.priority)
                if single is not None and single in amounts:
                    amounts = dict(amounts)
                    over = tree.usage(child, single) - tree.subtree(child, single)
                    largest = jobs.largest(single)
                    amounts[single] = min(amounts[single], max(0.0, over) + largest)
                freed[child] = amounts
    checkpoint = tree.checkpoint(request)
    tree.save(checkpoint, freed)
    try:
        for leaf, amounts in freed.items():
            tree.remove(
                leaf,
                {k: amounts[k] * (1 + _SLACK) + _SLACK for k in request if amounts.get(k, 0) > 0},
            )
        fits = workload_fits(tree, quota, request, allow_borrowing=True)
    finally:
        tree.restore(checkpoint)
    return not fits


def classical_targets(
    tree: Tree,
    by_quota: ByQuota,
    incoming: Incoming,
    request: Mapping[str, float],
    keys: set[str],
    index: VictimIndex | None = None,
    *,
    bound: bool = False,
    fill: bool = True,
) -> list[Target]:
    """The victims for ``incoming`` (``[]``: none found); ``tree`` is left as given.
    With ``index`` (``by_quota`` kept as a :class:`VictimIndex`), the lazy search; with
    ``bound`` too, a search that :func:`surely_none` rules out is skipped first (off by
    default: on the benchmark's world it ruled out 2 of 553 searches and doubled the
    cycle's time, the lazy search already stopping at each quota's borrowing). With
    ``fill=False`` (and ``index``) only whether there are victims counts: the greedy
    removal's set is returned as it first fits, without the fill-back that trims it
    (which never empties it)."""
    if index is not None:
        if bound and surely_none(tree, index, incoming, request, keys):
            return []
        return _lazy_targets(tree, index, incoming, request, keys, fill)
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
