"""The capacity tree of a whole cycle, kept current as jobs are admitted and reserved.

:class:`~ledger.dispatch.capacity.Tree` recomputes ``subtree`` and ``usage`` by walking the
tree on every call, which costs the size of the tree per admission check. A cycle asks
thousands of them against one tree that changes one leaf at a time, so this subclass
memoises the arithmetic: the structure-only values (``subtree``, ``guaranteed``, ancestry)
forever, the usage-dependent ones until a leaf below them changes. The arithmetic itself
stays :class:`Tree`'s: only its results are kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ledger.dispatch.capacity import Tree
from ledger.dispatch.model import Admitted, QuotaNode

__all__ = ["IncrementalTree"]

_Key = tuple[str, str]


class IncrementalTree(Tree):
    """A :class:`Tree` whose answers are cached between changes of usage."""

    def __init__(self, quotas: Iterable[QuotaNode], admitted: Iterable[Admitted]) -> None:
        self._ancestry: dict[str, list[str]] = {}
        self._subtree: dict[_Key, float] = {}
        self._guaranteed: dict[_Key, float] = {}
        self._usage: dict[_Key, float] = {}
        self._raw: dict[_Key, float] = {}
        self._available: dict[_Key, float] = {}
        super().__init__(quotas, admitted)

    def ancestry(self, name: str) -> list[str]:
        chain = self._ancestry.get(name)
        if chain is None:
            chain = self._ancestry[name] = super().ancestry(name)
        return list(chain)

    def add(self, quota: str, resources: Mapping[str, float]) -> None:
        before = self._before(quota, resources)
        super().add(quota, resources)
        self._changed(quota, resources, before, 1)

    def remove(self, quota: str, resources: Mapping[str, float]) -> None:
        before = self._before(quota, resources)
        super().remove(quota, resources)
        self._changed(quota, resources, before, -1)

    def _before(self, quota: str, resources: Mapping[str, float]) -> dict[str, list[float]]:
        """The usage along ``quota``'s ancestry, per changed key, before a change."""
        if quota not in self.nodes or not self.is_leaf(quota):
            return {}  # Tree.add refuses it
        chain = self.ancestry(quota)
        return {key: [self.usage(node, key) for node in chain] for key in resources}

    def _changed(
        self,
        quota: str,
        resources: Mapping[str, float],
        before: dict[str, list[float]],
        sign: int,
    ) -> None:
        """Carry a leaf's change up its ancestry: an inner node's usage moves by what its
        child's usage beyond its guarantee moved (Tree.usage's sum, one term changed)."""
        chain = self._ancestry[quota]
        for key, amount in resources.items():
            old_child = before[key][0]
            new_child = self.leaf_usage[quota].get(key, 0)
            self._usage[quota, key] = new_child
            for i in range(1, len(chain)):
                g = self.guaranteed(chain[i - 1], key)
                delta = max(0.0, new_child - g) - max(0.0, old_child - g)
                old_child = before[key][i]
                new_child = old_child + delta
                self._usage[chain[i], key] = new_child
            for node in chain:
                raw = self._raw.get((node, key))
                if raw is not None:
                    self._raw[node, key] = raw + sign * amount
        # available depends on the root's usage: every node's may have moved
        self._available.clear()

    def subtree(self, name: str, key: str) -> float:
        got = self._subtree.get((name, key))
        if got is None:
            got = self._subtree[name, key] = super().subtree(name, key)
        return got

    def guaranteed(self, name: str, key: str) -> float:
        got = self._guaranteed.get((name, key))
        if got is None:
            got = self._guaranteed[name, key] = super().guaranteed(name, key)
        return got

    def usage(self, name: str, key: str) -> float:
        got = self._usage.get((name, key))
        if got is None:
            got = self._usage[name, key] = super().usage(name, key)
        return got

    def raw_usage(self, name: str, key: str) -> float:
        got = self._raw.get((name, key))
        if got is None:
            got = self._raw[name, key] = super().raw_usage(name, key)
        return got

    def available(self, name: str, key: str, *args: Any, **kwargs: Any) -> float:
        if args or any(k != "own_cap" or v is not True for k, v in kwargs.items()):
            return super().available(name, key, *args, **kwargs)
        got = self._available.get((name, key))
        if got is None:
            got = self._available[name, key] = super().available(name, key)
        return got
