"""Quota usage arithmetic: used, borrowed, lent, max and over-admission per node x flavor.

Per quota node and flavor (quantities in the key's unit, see ``docs/quotas.md``):

- ``used``: the subtree's usage (only leaves own usage);
- ``borrowed``: what the node takes from above. A leaf: its usage above its ``min`` (never
  negative), idle-mode usage always counting as borrowed. An inner node: the part of its
  children's borrowing that neither its shared pool nor the children's lendable unused
  ``min`` supply (below), at least its usage above its ``min``, more when a child's unused
  guarantee is held back by its ``lend_limit``. A root has nobody to borrow from: it never
  borrows, that part is its over-admission;
- ``lent``: at each inner node, the children's borrowing is supplied first from the
  node's shared pool (its min minus its children's mins), then from the children's
  *lendable* unused min (a leaf's unused min, an inner node's unused pool and lendable
  children's min not lent among them; within ``lend_limit``: a node never lends more),
  in proportion to it, and whatever is left the node itself borrowed from above (or, at
  a root, is over capacity) and passes down. Each supplier's share is its ``lent``, so
  the tree's total ``lent`` equals its total ``borrowed`` exactly (a root's pass-down,
  its over-admission, is in its ``lent`` and in its children's ``borrowed``);
- ``max``: the node's own cap, else its parent's; a root's cap is its min;
- ``over_admitted``: usage above ``max`` (a quota change never evicts, it shows here);
  at a root with children, at least what its children borrow beyond what it and they
  can lend (their guarantees held back by ``lend_limit`` stay unlent).

This is the dispatcher's rule (:mod:`ledger.dispatch.capacity`, Kueue's resource_node: a
node with a lending limit keeps the rest of its quota for itself). Without idle-mode usage
(which the dispatcher admits by another rule), exactly: a non-root node's ``borrowed`` is
Kueue's usage beyond its subtree quota (``max(0, usage - subtree)``), a root's
``over_admitted`` is ``max(0, -available(root))``, and what a node lends outside its
subtree (:func:`lent_outside`) never exceeds its ``lend_limit``; tested with hypothesis
(``tests/projections/quotas/test_lending_matches_dispatcher.py``).

Two engines share these rules: :class:`UsageCalculator` computes a whole tree per flavor from
the leaves' usage (:func:`compute_usage`); :class:`FlavorUsage` keeps one flavor current as
leaves change, recomputing only the changed paths (the quota projection's hot path, through
:class:`ledger.usage_boards.UsageBoard`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ledger.errors import Invalid
from ledger.events import QuotaSpec
from ledger.quotas.model import topological_order

__all__ = [
    "FlavorUsage",
    "NodeUsage",
    "UsageCalculator",
    "allocate",
    "compute_usage",
    "lent_outside",
    "unused_offered",
    "within_lend_limit",
]


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """One quota node x flavor at an instant (all quantities in the key's unit)."""

    quota: str
    flavor: str
    min: int
    max: int
    used: int
    borrowed: int
    lent: int
    over_admitted: int

    @property
    def within_min(self) -> int:
        return self.used - self.borrowed


def allocate(amount: int, weights: Mapping[str, int]) -> dict[str, int]:
    """Split ``amount`` in proportion to ``weights`` (integers, largest remainder, ties by
    name); never more than a weight each, so ``amount >= sum(weights)`` returns weights."""
    total = sum(weights.values())
    if amount >= total:
        return dict(weights)
    if amount <= 0 or total == 0:
        return {k: 0 for k in weights}
    shares = {k: amount * w // total for k, w in weights.items()}
    left = amount - sum(shares.values())
    ranked = sorted(weights, key=lambda k: (-(amount * weights[k] % total), k))
    for k in ranked[:left]:
        shares[k] += 1
    return shares


class Lending(Protocol):
    """What :func:`lent_outside` reads of a row (:class:`NodeUsage` and the read models')."""

    @property
    def borrowed(self) -> int: ...

    @property
    def lent(self) -> int: ...


def lent_outside(
    parents: Mapping[str, str | None], rows: Mapping[tuple[str, str], Lending]
) -> dict[tuple[str, str], int]:
    """What each node x flavor of ``rows`` (every node of a tree, one instant) lends
    outside its subtree (its share of its siblings' borrowing; 0 at a root). A row's
    ``lent`` also holds what an inner node supplies to its own children (from its pool,
    or passed down from above): their ``borrowed`` less what they lend one another, taken
    out children first."""
    children: dict[str, list[str]] = {name: [] for name in parents}
    for name, parent in parents.items():
        if parent is not None:
            children[parent].append(name)
    flavors: dict[str, list[str]] = {}
    for quota, flavor in rows:
        flavors.setdefault(quota, []).append(flavor)
    out: dict[tuple[str, str], int] = {}
    for name in _leaves_first(parents, children):
        for flavor in flavors.get(name, ()):
            key = (name, flavor)
            kids = [(k, flavor) for k in children[name] if (k, flavor) in rows]
            down = sum(rows[k].borrowed - out[k] for k in kids)
            out[key] = rows[key].lent - down
    return out


def _leaves_first(
    parents: Mapping[str, str | None], children: Mapping[str, list[str]]
) -> list[str]:
    order: list[str] = []
    stack = [(name, False) for name, parent in parents.items() if parent is None]
    while stack:
        name, done = stack.pop()
        if done:
            order.append(name)
            continue
        stack.append((name, True))
        stack.extend((k, False) for k in children[name])
    return order


def within_lend_limit(unused: int, limit: int | None) -> int:
    """What a node offers its siblings: its unused min, never more than its lend limit."""
    return unused if limit is None else min(unused, limit)


def unused_offered(pool: int, offers: Iterable[int], demand: int) -> int:
    """An inner node's unused (what it offers its own siblings, before ``lend_limit``):
    its shared ``pool`` plus its children's ``offers`` (:func:`within_lend_limit`) less
    their borrowing ``demand`` those supply; what cannot be supplied, it borrows."""
    return max(0, pool + sum(offers) - demand)


def _supply(
    demand: int,
    pool: int,
    kids: Sequence[int],
    order: Sequence[str],
    unused: Sequence[int],
    lends: Sequence[int | None],
) -> tuple[int, dict[int, int], int, int]:
    """Supply ``demand`` (the children's borrowing) from the parent's ``pool``, then from
    the children's lendable unused min (within ``lend_limit``), in proportion
    (:func:`allocate`). Returns (from the pool, each child's share, what is left: borrowed
    from above or over capacity, what stays unused of the pool and the lendable parts:
    the parent's own unused, offered above)."""
    from_pool = min(demand, pool)
    rest = demand - from_pool
    offered: dict[str, int] = {}
    for k in kids:
        offered[order[k]] = within_lend_limit(unused[k], lends[k])
    spare = unused_offered(pool, offered.values(), demand)
    shares: dict[int, int] = {}
    if rest:
        split = allocate(rest, offered)
        for k in kids:
            shares[k] = share = split[order[k]]
            rest -= share
    return from_pool, shares, rest, spare


def _caps(
    parent: Sequence[int | None], mins: Sequence[int], maxes: Sequence[int | None]
) -> list[int]:
    """Each node's ``max`` in tree order: its own cap, else its parent's; a root's is its min."""
    caps = [0] * len(mins)
    for i, own in enumerate(maxes):
        p = parent[i]
        caps[i] = own if own is not None else (caps[p] if p is not None else mins[i])
    return caps


def compute_usage(
    specs: Mapping[str, QuotaSpec],
    used: Mapping[str, Mapping[str, int]],
    idle: Mapping[str, Mapping[str, int]] | None = None,
    *,
    flavors: Iterable[str] | None = None,
) -> dict[tuple[str, str], NodeUsage]:
    """Per (quota, flavor): min, max, used, borrowed, lent, over-admission.

    ``used`` is each leaf quota's usage per flavor (idle-mode usage included);
    ``idle`` the part of it by idle-mode jobs. Usage on an inner or unknown quota is
    refused: the caller reports it under :data:`NO_QUOTA`.
    """
    idle = idle or {}
    calc = UsageCalculator(specs)
    for quota in [*used, *idle]:
        if quota not in calc.leaves:
            raise Invalid(f"usage on {quota!r}, which is not a leaf quota")
    if flavors is None:
        keys: set[str] = set()
        for spec in specs.values():
            keys.update(spec.min, spec.max, spec.lend_limit)
        for per in used.values():
            keys.update(per)
        flavors = keys
    out: dict[tuple[str, str], NodeUsage] = {}
    for flavor in sorted(set(flavors)):
        leaf_used = {q: v[flavor] for q, v in used.items() if v.get(flavor)}
        leaf_idle = {q: v[flavor] for q, v in idle.items() if v.get(flavor)}
        for row in calc.flavor(flavor, leaf_used, leaf_idle):
            out[(row.quota, flavor)] = row
    return out


class UsageCalculator:
    """The usage arithmetic for one tree, compiled once and run per flavor (hot path of
    the quota projection, which recomputes at every change point)."""

    def __init__(self, specs: Mapping[str, QuotaSpec]) -> None:
        self.specs = specs
        self.order = topological_order(specs)
        self.index = index = {name: i for i, name in enumerate(self.order)}
        self.parent = [
            index.get(specs[n].parent) if specs[n].parent is not None else None  # type: ignore[arg-type]
            for n in self.order
        ]
        self.children: list[list[int]] = [[] for _ in self.order]
        for i, p in enumerate(self.parent):
            if p is not None:
                self.children[p].append(i)
        self.leaves = frozenset(n for i, n in enumerate(self.order) if not self.children[i])
        self._per_flavor: dict[str, tuple[list[int], list[int | None], list[int | None]]] = {}

    def _compiled(self, flavor: str) -> tuple[list[int], list[int | None], list[int | None]]:
        found = self._per_flavor.get(flavor)
        if found is None:
            specs = [self.specs[n] for n in self.order]
            found = (
                [s.min.get(flavor, 0) for s in specs],
                [s.max.get(flavor) for s in specs],
                [s.lend_limit.get(flavor) for s in specs],
            )
            self._per_flavor[flavor] = found
        return found

    def flavor(
        self, flavor: str, used_in: Mapping[str, int], idle_in: Mapping[str, int]
    ) -> list[NodeUsage]:
        """One row per node (tree order) from each leaf's usage and idle-mode part."""
        return [
            NodeUsage(self.order[i], flavor, *numbers)
            for i, numbers in enumerate(self.numbers(flavor, used_in, idle_in))
        ]

    def numbers(
        self, flavor: str, used_in: Mapping[str, int], idle_in: Mapping[str, int]
    ) -> list[tuple[int, int, int, int, int, int]]:
        """Per node in tree order: (min, max, used, borrowed, lent, over_admitted)."""
        mins, maxes, lends = self._compiled(flavor)
        order, parent, children = self.order, self.parent, self.children
        n = len(order)
        used = [0] * n
        borrowed = [0] * n
        unused = [0] * n
        lent = [0] * n
        over = [0] * n  # a root's children's borrowing nobody could supply
        for i in range(n - 1, -1, -1):  # children before parents
            kids = children[i]
            if kids:
                total = demand = kid_mins = 0
                for k in kids:
                    total += used[k]
                    demand += borrowed[k]
                    kid_mins += mins[k]
                from_pool, shares, rest, spare = _supply(
                    demand, max(0, mins[i] - kid_mins), kids, order, unused, lends
                )
                for k, share in shares.items():
                    lent[k] += share
                lent[i] += from_pool + rest  # rest: borrowed from above and passed down
                used[i] = total
                unused[i] = spare
                if parent[i] is None:
                    over[i] = rest
                else:
                    borrowed[i] = rest
            else:
                total = used_in.get(order[i], 0)
                extra = min(total, idle_in.get(order[i], 0))
                regular = total - extra
                used[i] = total
                if parent[i] is not None:  # a root has nobody to borrow from
                    borrowed[i] = max(0, regular - mins[i]) + extra
                unused[i] = max(0, mins[i] - regular)
        caps = _caps(parent, mins, maxes)
        return [
            (mins[i], caps[i], used[i], borrowed[i], lent[i], max(over[i], used[i] - caps[i], 0))
            for i in range(n)
        ]


class FlavorUsage:
    """One flavor's usage over one tree, kept current as leaves change: a leaf's change
    recomputes only the path to the root and the lending among each path node's children,
    not the whole tree (the quota projection does this at every change point).

    :meth:`row` gives the same numbers as :meth:`UsageCalculator.numbers`, plus the
    subtree's counts (queued demand, running jobs, queued jobs).
    """

    def __init__(self, calc: UsageCalculator, flavor: str) -> None:
        mins, maxes, lends = calc._compiled(flavor)
        n = len(calc.order)
        self.calc = calc
        self.mins = mins
        self.lends = lends
        children = calc.children
        self.caps = _caps(calc.parent, mins, maxes)
        self.kid_mins = [sum(mins[k] for k in children[i]) for i in range(n)]
        self.total = [0] * n  # a leaf's usage (idle-mode part included)
        self.idle = [0] * n
        self.used = [0] * n
        self.borrowed = [0] * n
        #: a leaf's unused min; an inner node's unused pool plus its children's lendable
        #: unused min not lent among them (what it offers its siblings)
        self.unused = list(mins)
        for i in range(n - 1, -1, -1):  # children before parents: nothing used yet
            if children[i]:
                self.unused[i] = max(0, mins[i] - self.kid_mins[i]) + sum(
                    within_lend_limit(self.unused[k], lends[k]) for k in children[i]
                )
        self.over = [0] * n  # at a root: its children's borrowing nobody could supply
        self.lent_down = [0] * n  # supplied to its children (shared pool + passed down)
        self.lent_up = [0] * n  # its share of what its parent's children borrow
        self.counts = [[0, 0, 0] for _ in range(n)]  # queued, running_jobs, queued_jobs
        self._dirty: set[int] = set()
        self._paths: dict[int, tuple[int, ...]] = {}
        self.changed: set[int] = set()

    def set_leaf(
        self, i: int, total: int, idle: int, queued: int, running: int, queued_jobs: int
    ) -> None:
        """Set leaf ``i``'s own usage and counts; :meth:`settle` recomputes."""
        if total != self.total[i] or idle != self.idle[i]:
            self.total[i] = total
            self.idle[i] = idle
            self._dirty.add(i)
        c = self.counts[i]
        dq, dr, dj = queued - c[0], running - c[1], queued_jobs - c[2]
        if dq or dr or dj:
            parent, counts, changed = self.calc.parent, self.counts, self.changed
            node: int | None = i
            while node is not None:
                up = counts[node]
                up[0] += dq
                up[1] += dr
                up[2] += dj
                changed.add(node)
                node = parent[node]

    def settle(self) -> set[int]:
        """Recompute after :meth:`set_leaf` calls; returns (and forgets) the nodes whose
        numbers changed since the last call."""
        dirty = self._dirty
        if dirty:
            calc = self.calc
            parent, children = calc.parent, calc.children
            if len(dirty) == 1:
                path: Sequence[int] = self._path(next(iter(dirty)))
            else:
                nodes: set[int] = set()
                for leaf in dirty:
                    nodes.update(self._path(leaf))
                path = sorted(nodes, reverse=True)  # children before parents
            dirty.clear()
            mins, used, borrowed, unused = self.mins, self.used, self.borrowed, self.unused
            changed = self.changed
            lenders: set[int] = set()  # parents whose children's borrowed / unused moved
            for i in path:
                p = parent[i]
                if children[i]:
                    total = 0
                    for k in children[i]:
                        total += used[k]
                    if total != used[i]:
                        used[i] = total
                        changed.add(i)
                    if i not in lenders:
                        continue  # no child's borrowed or unused moved
                    b, u = self._lend(i)
                else:
                    total = self.total[i]
                    extra = min(total, self.idle[i])
                    regular = total - extra
                    b = max(0, regular - mins[i]) + extra if p is not None else 0
                    u = max(0, mins[i] - regular)
                    if total != used[i]:
                        used[i] = total
                        changed.add(i)
                if b != borrowed[i]:
                    changed.add(i)
                if p is not None and (b != borrowed[i] or u != unused[i]):
                    lenders.add(p)
                borrowed[i], unused[i] = b, u
        out = set(self.changed)
        self.changed.clear()
        return out

    def _path(self, leaf: int) -> tuple[int, ...]:
        found = self._paths.get(leaf)
        if found is None:
            nodes = []
            node: int | None = leaf
            while node is not None:
                nodes.append(node)
                node = self.calc.parent[node]
            found = self._paths[leaf] = tuple(nodes)
        return found

    def _lend(self, p: int) -> tuple[int, int]:
        """Split the borrowing of ``p``'s children among its pool, its children, above;
        returns ``p``'s borrowed and unused (at a root, the rest is over-admission)."""
        kids = self.calc.children[p]
        borrowed, lent_up, changed = self.borrowed, self.lent_up, self.changed
        demand = 0
        for k in kids:
            demand += borrowed[k]
        from_pool, shares, rest, spare = _supply(
            demand,
            max(0, self.mins[p] - self.kid_mins[p]),
            kids,
            self.calc.order,
            self.unused,
            self.lends,
        )
        down = from_pool + rest
        if down != self.lent_down[p]:
            self.lent_down[p] = down
            changed.add(p)
        for k in kids:
            share = shares.get(k, 0)
            if share != lent_up[k]:
                lent_up[k] = share
                changed.add(k)
        if self.calc.parent[p] is not None:
            return rest, spare
        if rest != self.over[p]:
            self.over[p] = rest
            changed.add(p)
        return 0, spare

    def row(self, i: int) -> tuple[int, ...]:
        """(min, max, used, borrowed, lent, queued, running_jobs, queued_jobs, over_admitted)."""
        used, cap, c = self.used[i], self.caps[i], self.counts[i]
        return (
            self.mins[i],
            cap,
            used,
            self.borrowed[i],
            self.lent_down[i] + self.lent_up[i],
            c[0],
            c[1],
            c[2],
            max(0, used - cap, self.over[i]),
        )
