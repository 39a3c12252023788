"""Kueue's hierarchical capacity over the quota tree (its ``resource_node`` arithmetic).

For a node and a resource key:

- ``guaranteed`` = ``subtree - lend_limit`` when a lending limit is set, else 0: the part
  of the node's quota nobody outside its subtree can reach;
- ``subtree`` (Kueue's SubtreeQuota) = a leaf's ``min``; an inner node's own pool
  (``min`` minus its children's mins) plus what each child lends (``subtree - guaranteed``);
- ``usage`` of a leaf is what its workloads request; an inner node counts only what its
  children use beyond their guarantee;
- ``available(node)`` = the root's ``subtree - usage``, or for a child its idle guarantee
  plus what the parent has available, capped by its ``max`` (borrowing limit ``max - min``).

A workload fits in a leaf when, for every key it requests, ``available(leaf) >= request``.
Quotas are fixed for a tree's life, so ``subtree`` and ``guaranteed`` are computed once;
usage is kept per node as workloads are added and removed (Kueue's ``addUsage`` /
``removeUsage``), so a check costs the depth of the tree, not its size.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from ledger.dispatch.model import Admitted, DispatchError, QuotaNode

__all__ = ["Checkpoint", "Tree"]


class Checkpoint:
    """A tree's usage figures of some keys as they were (table, key, value; None:
    absent), and the nodes recorded."""

    __slots__ = ("figures", "keys", "nodes")

    def __init__(self, keys: Iterable[str]) -> None:
        self.keys = list(keys)
        self.nodes: set[str] = set()
        self.figures: list[tuple[dict[str, float], str, float | None]] = []


class Tree:
    """The quota tree with the usage of one set of admitted workloads (changeable, to
    simulate removals and admissions)."""

    def __init__(self, quotas: Iterable[QuotaNode], admitted: Iterable[Admitted]) -> None:
        self.nodes: dict[str, QuotaNode] = {}
        for q in quotas:
            if q.name in self.nodes:
                raise DispatchError(f"quota {q.name!r} appears twice")
            self.nodes[q.name] = q
        self.children: dict[str, list[str]] = {name: [] for name in self.nodes}
        for q in self.nodes.values():
            if q.parent is not None:
                if q.parent not in self.nodes:
                    raise DispatchError(f"quota {q.name!r}: unknown parent {q.parent!r}")
                self.children[q.parent].append(q.name)
        self._paths: dict[str, list[str]] = {}
        for name in self.nodes:
            self._paths[name] = self._walk_up(name)  # refuses a cycle
        self.keys: set[str] = set()
        for q in self.nodes.values():
            self.keys.update(q.min or {}, q.max, q.lend_limit)
        self._min: dict[str, dict[str, float]] = {}
        for name in self.nodes:
            self._resolve_min(name)
        self._subtree: dict[tuple[str, str], float] = {}
        self._guaranteed: dict[tuple[str, str], float] = {}
        #: raw usage per node (a subtree's workloads) and Kueue's usage per node
        self._raw: dict[str, dict[str, float]] = {name: {} for name in self.nodes}
        self._usage: dict[str, dict[str, float]] = {name: {} for name in self.nodes}
        self._used_keys: set[str] = set()
        for wl in admitted:
            self.add(wl.quota, wl.resources)

    # structure -------------------------------------------------------------------------

    def _walk_up(self, name: str) -> list[str]:
        chain = [name]
        seen = {name}
        parent = self.nodes[name].parent
        while parent is not None:
            if parent in seen:
                raise DispatchError(f"quota {name!r}: its parents form a cycle")
            chain.append(parent)
            seen.add(parent)
            parent = self.nodes[parent].parent
        return chain

    def ancestry(self, name: str) -> list[str]:
        """``name`` and its ancestors, leaf first (do not change the list)."""
        path = self._paths.get(name)
        if path is None:
            raise DispatchError(f"unknown quota {name!r}")
        return path

    def is_leaf(self, name: str) -> bool:
        return not self.children[name]

    def contains(self, ancestor: str, name: str) -> bool:
        return ancestor in self.ancestry(name)

    def root(self, name: str) -> str:
        return self.ancestry(name)[-1]

    def leaves(self, name: str) -> list[str]:
        """The leaf quotas of ``name``'s subtree, in definition order."""
        if self.is_leaf(name):
            return [name]
        return [leaf for child in self.children[name] for leaf in self.leaves(child)]

    def _resolve_min(self, name: str) -> dict[str, float]:
        if name in self._min:
            return self._min[name]
        given = self.nodes[name].min
        if given is None:
            total: dict[str, float] = {}
            for child in self.children[name]:
                for k, v in self._resolve_min(child).items():
                    total[k] = total.get(k, 0) + v
            result = total
        else:
            result = dict(given)
        self._min[name] = result
        return result

    def min(self, name: str, key: str) -> float:
        return self._min[name].get(key, 0)

    # usage -----------------------------------------------------------------------------

    def add(self, quota: str, resources: Mapping[str, float]) -> None:
        if quota not in self.nodes:
            raise DispatchError(f"unknown quota {quota!r}")
        if not self.is_leaf(quota):
            raise DispatchError(f"quota {quota!r} has children: only leaf quotas run jobs")
        self.add_known(quota, resources)

    def add_known(self, quota: str, resources: Mapping[str, float]) -> None:
        """:meth:`add` for a leaf already checked (the victim search's inner loops)."""
        path = self._paths[quota]
        last = len(path) - 1
        raws, usages = self._raw, self._usage
        used_keys = self._used_keys
        for k, v in resources.items():
            if k not in used_keys:
                used_keys.add(k)
            for node in path:
                raw = raws[node]
                raw[k] = raw.get(k, 0) + v
            # Kueue's addUsage: what exceeds a node's idle guarantee is stored in its parent
            delta = v
            for i, node in enumerate(path):
                usage = usages[node]
                used = usage.get(k, 0)
                guaranteed = self._guaranteed.get((node, k))
                if guaranteed is None:
                    guaranteed = self.guaranteed(node, k)
                local = max(0.0, guaranteed - used)
                usage[k] = used + delta
                if i == last or delta <= local:
                    break
                delta -= local

    def remove(self, quota: str, resources: Mapping[str, float]) -> None:
        path = self._paths[quota]
        last = len(path) - 1
        raws, usages = self._raw, self._usage
        for k, v in resources.items():
            for node in path:
                raw = raws[node]
                raw[k] = raw.get(k, 0) - v
            # Kueue's removeUsage: give back to the parent what was stored there
            delta = v
            for i, node in enumerate(path):
                usage = usages[node]
                used = usage.get(k, 0)
                guaranteed = self._guaranteed.get((node, k))
                if guaranteed is None:
                    guaranteed = self.guaranteed(node, k)
                stored = used - guaranteed
                usage[k] = used - delta
                if i == last or stored <= 0:
                    break
                delta = min(delta, stored)

    def checkpoint(self, keys: Iterable[str]) -> Checkpoint:
        """A point to come back to exactly with :meth:`restore`, after :meth:`save` has
        recorded every figure about to change (no float residue of adding back)."""
        return Checkpoint(keys)

    def save(self, checkpoint: Checkpoint, leaves: Iterable[str]) -> None:
        """Record in ``checkpoint`` the usage of its keys on every node above ``leaves``
        as it is now, unless recorded already (the first recording is the one kept)."""
        keys = checkpoint.keys
        seen = checkpoint.nodes
        out = checkpoint.figures
        for leaf in leaves:
            for node in self._paths[leaf]:
                if node in seen:
                    break
                seen.add(node)
                for table in (self._raw[node], self._usage[node]):
                    for k in keys:
                        out.append((table, k, table.get(k)))

    def restore(self, checkpoint: Checkpoint) -> None:
        """Put back what was saved in ``checkpoint`` (the caller changed nothing else: the
        tree is as it was then)."""
        for table, k, value in reversed(checkpoint.figures):
            if value is None:
                table.pop(k, None)
            else:
                table[k] = value

    def borrowing_leaves(self, node: str, skip: str | None, keys: Collection[str]) -> list[str]:
        """The leaves below ``node`` (not below its child ``skip``) reached through nodes
        not within their nominal quota in ``keys``, each itself not within it (the walk of
        Kueue's ``collectCandidatesInSubtree``)."""
        leaves: list[str] = []
        stack = [node]
        while stack:
            for child in self.children[stack.pop()]:
                if child == skip or self.within_nominal(child, keys):
                    continue
                if self.children[child]:
                    stack.append(child)
                else:
                    leaves.append(child)
        return leaves

    @property
    def leaf_usage(self) -> dict[str, dict[str, float]]:
        """What each leaf's workloads request, per key."""
        return {name: usage for name, usage in self._raw.items() if self.is_leaf(name)}

    def used_keys(self) -> set[str]:
        """Keys some workload uses, with or without a quota of their own."""
        return self._used_keys

    def raw_usage(self, name: str, key: str) -> float:
        """Everything the subtree's workloads request of ``key``."""
        return self._raw[name].get(key, 0)

    def is_borrowing(self, name: str, key: str, extra: float = 0) -> bool:
        """Raw usage (plus ``extra``) above the node's min."""
        return self.raw_usage(name, key) + extra > self.min(name, key)

    # Kueue's arithmetic ----------------------------------------------------------------

    def guaranteed(self, name: str, key: str) -> float:
        cached = self._guaranteed.get((name, key))
        if cached is not None:
            return cached
        limit = self.nodes[name].lend_limit.get(key)
        value = 0.0
        if limit is not None and self.nodes[name].parent is not None:
            value = max(0.0, self.subtree(name, key) - limit)
        self._guaranteed[(name, key)] = value
        return value

    def subtree(self, name: str, key: str) -> float:
        cached = self._subtree.get((name, key))
        if cached is not None:
            return cached
        if self.is_leaf(name):
            value = self.min(name, key)
        else:
            children = self.children[name]
            own = 0.0
            if self.nodes[name].min is not None:
                own = max(0.0, self.min(name, key) - sum(self.min(c, key) for c in children))
            value = own + sum(self.subtree(c, key) - self.guaranteed(c, key) for c in children)
        self._subtree[(name, key)] = value
        return value

    def usage(self, name: str, key: str) -> float:
        return self._usage[name].get(key, 0)

    def available(self, name: str, key: str, *, own_cap: bool = True) -> float:
        """Kueue's ``available`` (negative when over-admitted). ``own_cap=False`` ignores
        ``name``'s own ``max`` (idle jobs: only the ancestors' limits and the root stop them)."""
        node = self.nodes[name]
        # the cached figures read directly: the victim search asks this after every removal
        subtree = self._subtree.get((name, key))
        if subtree is None:
            subtree = self.subtree(name, key)
        if node.parent is None:
            return subtree - self._usage[name].get(key, 0)
        guaranteed = self._guaranteed.get((name, key))
        if guaranteed is None:
            guaranteed = self.guaranteed(name, key)
        used = self._usage[name].get(key, 0)
        local = max(0.0, guaranteed - used)
        from_parent = self.available(node.parent, key)
        cap = node.max.get(key) if own_cap else None
        if cap is not None:
            borrowing_limit = cap - self._min[name].get(key, 0)
            stored_in_parent = subtree - guaranteed
            used_in_parent = max(0.0, used - guaranteed)
            from_parent = min(from_parent, stored_in_parent - used_in_parent + borrowing_limit)
        return local + from_parent

    def capped(self, name: str, request: Mapping[str, float]) -> bool:
        """Some positive amount of ``request`` exceeds what ``name``'s own ``max`` leaves
        it (its unused guarantee plus its room to borrow), whatever the parent has: then
        :meth:`available` is below it too (``local + min(parent, room) <= local + room``),
        and stays so while ``name``'s own usage does not change."""
        node = self.nodes[name]
        if node.parent is None:
            return False
        for key, v in request.items():
            cap = node.max.get(key)
            if cap is None or v <= 0:
                continue
            guaranteed = self.guaranteed(name, key)
            used = self.usage(name, key)
            local = max(0.0, guaranteed - used)
            borrowing_limit = cap - self.min(name, key)
            stored_in_parent = self.subtree(name, key) - guaranteed
            used_in_parent = max(0.0, used - guaranteed)
            if local + (stored_in_parent - used_in_parent + borrowing_limit) < v:
                return True
        return False

    def potential_available(self, name: str, key: str) -> float:
        """Kueue's ``potentialAvailable``: the most ``name`` could use of ``key`` with no
        usage anywhere, within its borrowing limits."""
        node = self.nodes[name]
        if node.parent is None:
            return self.subtree(name, key)
        avail = self.guaranteed(name, key) + self.potential_available(node.parent, key)
        cap = node.max.get(key)
        if cap is not None:
            avail = min(avail, self.subtree(name, key) + cap - self.min(name, key))
        return avail

    def fits(self, quota: str, resources: Mapping[str, float], *, own_cap: bool = True) -> bool:
        return all(
            v <= 0 or self.available(quota, k, own_cap=own_cap) >= v for k, v in resources.items()
        )

    def keys_short(self, quota: str, resources: Mapping[str, float]) -> set[str]:
        """The requested keys that do not fit now (those needing preemption)."""
        return {k for k, v in resources.items() if v > 0 and self.available(quota, k) < v}

    def local_available(self, name: str, key: str) -> float:
        """Kueue's ``LocalAvailable``: unused guarantee, invisible to the parent."""
        return max(0.0, self.guaranteed(name, key) - self.usage(name, key))

    def borrowing_with(self, name: str, key: str, extra: float = 0) -> bool:
        """Kueue's ``BorrowingWith``: usage plus ``extra`` above the subtree quota (a
        leaf's ``min``; an inner node's pool plus what its children lend)."""
        return self.subtree(name, key) < self.usage(name, key) + extra

    def within_nominal(self, name: str, keys: Iterable[str]) -> bool:
        """Kueue's ``IsWithinNominalInResources``: not borrowing in any of ``keys``."""
        # borrowing_with inlined: the victim search asks this of every node it passes
        usage = self._usage[name]
        cached = self._subtree
        for k in keys:
            subtree = cached.get((name, k))
            if subtree is None:
                subtree = self.subtree(name, k)
            if subtree < usage.get(k, 0):
                return False
        return True

    def fit_in_quota(
        self, name: str, requests: Mapping[str, float]
    ) -> tuple[bool, dict[str, float]]:
        """Kueue's ``QuantitiesFitInQuota``: whether ``requests`` fit within ``name``'s
        subtree quota, and what remains for its parent beyond its unused guarantee."""
        fits = all(not self.borrowing_with(name, k, v) for k, v in requests.items())
        remaining = {k: max(0.0, v - self.local_available(name, k)) for k, v in requests.items()}
        return fits, remaining
