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
        super().add(quota, resources)
        self._changed(quota, resources)

    def remove(self, quota: str, resources: Mapping[str, float]) -> None:
        super().remove(quota, resources)
        self._changed(quota, resources)

    def _changed(self, quota: str, resources: Mapping[str, float]) -> None:
        chain = self._ancestry.get(quota) or self.ancestry(quota)
        for key in resources:
            for node in chain:
                self._usage.pop((node, key), None)
                self._raw.pop((node, key), None)
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
        if args or kwargs:
            return super().available(name, key, *args, **kwargs)
        got = self._available.get((name, key))
        if got is None:
            got = self._available[name, key] = super().available(name, key)
        return got
