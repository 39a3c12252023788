"""The quota tree as a value: specs by id, workspace bindings, units, and its shape.

A tree is what an operator applies (:mod:`ledger.quotas.document` reads its file,
:mod:`ledger.quotas.validate` checks its rules) and what the quota projection folds events
into; its order (parents before children) is the one every other quota module walks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from ledger.canonical import canonical_json
from ledger.errors import Invalid
from ledger.events import QuotaSpec

__all__ = [
    "NO_QUOTA",
    "RESOURCE_UNITS",
    "QuotaTree",
    "QuotaTreeError",
    "children_by_name",
    "children_of",
    "resource_unit",
    "spec_hash",
    "topological_order",
    "tree_order",
]

#: Where usage goes whose job has no quota (unbound workspace, deleted or inner quota).
NO_QUOTA = "-"

RESOURCE_UNITS = {"gpu/*": "mGPU", "cpu": "milli-cores", "memory": "MiB"}


class QuotaTreeError(Invalid):
    """A quota tree that cannot be applied; the message names the quota and the field."""


def resource_unit(key: str) -> str:
    """The unit quantities of ``key`` are counted in."""
    if key.startswith("gpu/"):
        return "mGPU"
    return RESOURCE_UNITS.get(key, "")


@dataclass(frozen=True)
class QuotaTree:
    """Quota specs by id and workspace bindings (workspace -> quota id)."""

    specs: Mapping[str, QuotaSpec] = field(default_factory=dict)
    bindings: Mapping[str, str] = field(default_factory=dict)

    def children(self) -> dict[str, list[str]]:
        return children_by_name(self.specs)

    def workspaces_of(self, quota_id: str) -> list[str]:
        return sorted(ws for ws, q in self.bindings.items() if q == quota_id)


def spec_hash(spec: QuotaSpec) -> str:
    """A stable digest of a spec (deterministic event ids of apply)."""
    return hashlib.sha256(canonical_json(spec.model_dump(mode="json"))).hexdigest()


def children_of(parents: Mapping[str, str | None]) -> dict[str, list[str]]:
    """Each node's children by name, from a node → parent map (unknown parents: none)."""
    out: dict[str, list[str]] = {}
    for name in sorted(parents):
        parent = parents[name]
        if parent is not None and parent in parents:
            out.setdefault(parent, []).append(name)
    return out


def children_by_name(specs: Mapping[str, QuotaSpec]) -> dict[str, list[str]]:
    """Each quota's child quotas, by name."""
    return children_of({n: s.parent for n, s in specs.items()})


def tree_order(parents: Mapping[str, str | None]) -> list[str]:
    """Parents before children, siblings by name; unknown parents count as roots."""
    children = children_of(parents)
    roots = sorted(n for n, p in parents.items() if p is None or p not in parents)
    order: list[str] = []
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(reversed(children.get(node, [])))
    return order


def topological_order(specs: Mapping[str, QuotaSpec]) -> list[str]:
    """Quota ids with every parent before its children (depth first, by name)."""
    return tree_order({n: s.parent for n, s in specs.items()})
