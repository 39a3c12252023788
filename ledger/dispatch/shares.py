"""Kueue's dominant resource share (``pkg/cache/scheduler/fair_sharing.go``) on the quota
tree: the fair-sharing order of quotas and cohorts, for preemption and for queue order.

For a node with a parent: per resource *name* (the part of a key before ``/``, summed over
its flavors), what the node uses above its subtree quota, over what its parent could lend
it (``potentialAvailable`` of the parent per key, summed by name); the largest ratio
(times 1000, as Kueue) divided by the node's ``weight``. A root node's share is 0; a
borrowing node with weight 0 has an infinite share and sorts after every finite share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ledger.dispatch.capacity import Tree

__all__ = ["Share", "dominant_resource_share", "resource_name", "share"]


def resource_name(key: str) -> str:
    """``gpu/A100`` -> ``gpu``: the resource a flavored key belongs to."""
    return key.split("/", 1)[0]


@dataclass(frozen=True, order=False)
class Share:
    """One node's DRS; :attr:`sort_key` orders as Kueue's ``CompareDRS``."""

    weight: float
    unweighted: float
    dominant: str = ""
    #: the keys the node uses above its subtree quota
    borrowed: frozenset[str] = frozenset()

    @property
    def borrowing(self) -> bool:
        return bool(self.borrowed)

    @property
    def is_zero(self) -> bool:
        return self.unweighted == 0

    @property
    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and not self.is_zero

    @property
    def value(self) -> float:
        """The weighted share (``inf`` for a borrowing node of weight 0)."""
        if self.is_zero:
            return 0.0
        if self.weight == 0:
            return math.inf
        return self.unweighted / self.weight

    @property
    def sort_key(self) -> tuple[bool, float]:
        if self.zero_weight_borrows:
            return (True, self.unweighted)
        return (False, self.value)


def share(
    tree: Tree, name: str, extra: Mapping[str, float] | None = None, *, of: str | None = None
) -> Share:
    """The DRS of ``of`` (default ``name``; a leaf or an inner node), with ``extra`` first
    added to the leaf ``name`` (the share it would have after admitting a request there,
    as Kueue's fair-sharing tournament compares each ancestor of a pending workload)."""
    node = name if of is None else of
    weight = tree.nodes[node].weight
    parent = tree.nodes[node].parent
    if parent is None:
        return Share(weight, 0.0)
    if extra:
        tree.add(name, extra)
    try:
        borrowing: dict[str, float] = {}
        borrowed: set[str] = set()
        for key in tree.keys | tree.used_keys():
            over = tree.usage(node, key) - tree.subtree(node, key)
            if over > 0:
                rname = resource_name(key)
                borrowing[rname] = borrowing.get(rname, 0) + over
                borrowed.add(key)
    finally:
        if extra:
            tree.remove(name, extra)
    if not borrowing:
        return Share(weight, 0.0)
    lendable: dict[str, float] = {}
    for key in tree.keys | tree.used_keys():
        rname = resource_name(key)
        lendable[rname] = lendable.get(rname, 0) + tree.potential_available(parent, key)
    best, dominant = 0.0, ""
    for rname in sorted(borrowing):
        lend = lendable.get(rname, 0)
        if lend > 0:
            ratio = borrowing[rname] * 1000.0 / lend
            if ratio > best:
                best, dominant = ratio, rname
    return Share(weight, best, dominant, frozenset(borrowed))


def dominant_resource_share(
    tree: Tree, quota: str, extra: Mapping[str, float] | None = None, *, of: str | None = None
) -> float:
    """The weighted DRS of ``quota`` (or of its ancestor ``of``) as one number, with
    ``extra`` added to ``quota`` first (``inf`` when a weight-0 node borrows)."""
    return share(tree, quota, extra, of=of).value
