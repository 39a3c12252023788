"""The rules a quota tree keeps; :func:`validate_tree` names the first one it breaks.

Parents exist and form no cycle; ``max`` is at least ``min`` and a root's ``max`` no more than
its ``min`` (it has nothing to borrow from); ``lend_limit`` is within ``min``; the children's
mins fit in their parent's; workspaces are bound to leaf quotas only; ``fair_sharing`` is
set on root quotas only (it holds for the root's whole tree).
"""

from __future__ import annotations

from collections.abc import Mapping

from ledger.quotas.model import QuotaTree, QuotaTreeError, children_by_name, topological_order

__all__ = ["refuse_cycles", "validate_tree"]


def refuse_cycles(parents: Mapping[str, str | None]) -> None:
    """Raise :class:`QuotaTreeError` naming a parent cycle, if any (node → parent map)."""
    for start in sorted(parents):
        seen = [start]
        node = parents[start]
        while node is not None and node in parents:
            if node in seen:
                cycle = " -> ".join([*seen[seen.index(node) :], node])
                raise QuotaTreeError(f"quota {node!r} is in a parent cycle: {cycle}")
            seen.append(node)
            node = parents[node]


def validate_tree(tree: QuotaTree) -> None:
    """Raise :class:`QuotaTreeError` naming the first rule a tree breaks."""
    specs = tree.specs
    for name, spec in specs.items():
        if spec.parent is not None and spec.parent not in specs:
            raise QuotaTreeError(f"quota {name!r}: unknown parent {spec.parent!r}")
    refuse_cycles({n: s.parent for n, s in specs.items()})
    children = children_by_name(specs)
    for name in topological_order(specs):
        spec = specs[name]
        for key, cap in spec.max.items():
            if cap < spec.min.get(key, 0):
                raise QuotaTreeError(
                    f"quota {name!r}: max.{key} = {cap} is below min.{key} = {spec.min.get(key, 0)}"
                )
        if spec.parent is None:
            for key, cap in spec.max.items():
                if cap > spec.min.get(key, 0):
                    raise QuotaTreeError(
                        f"quota {name!r} has no parent, so it has nothing to borrow from: "
                        f"max.{key} = {cap} must not exceed min.{key} = {spec.min.get(key, 0)}"
                    )
        if spec.fair_sharing and spec.parent is not None:
            raise QuotaTreeError(
                f"quota {name!r}: fair_sharing applies to a whole tree, so it is set on the "
                f"root quota only (this quota's parent is {spec.parent!r})"
            )
        for key, limit in spec.lend_limit.items():
            if limit > spec.min.get(key, 0):
                raise QuotaTreeError(
                    f"quota {name!r}: lend_limit.{key} = {limit} exceeds min.{key} = "
                    f"{spec.min.get(key, 0)}"
                )
        kids = children.get(name, [])
        if kids:
            keys = sorted({k for kid in kids for k in specs[kid].min})
            for key in keys:
                total = sum(specs[kid].min.get(key, 0) for kid in kids)
                if total > spec.min.get(key, 0):
                    raise QuotaTreeError(
                        f"quota {name!r}: its children's min.{key} add up to {total}, "
                        f"more than its own min.{key} = {spec.min.get(key, 0)} "
                        f"(children: {', '.join(kids)})"
                    )
    for ws, quota in sorted(tree.bindings.items()):
        if quota not in specs:
            raise QuotaTreeError(f"workspace {ws!r} is bound to unknown quota {quota!r}")
        if children.get(quota):
            raise QuotaTreeError(
                f"quota {quota!r} has child quotas, so workspace {ws!r} cannot be bound to it "
                "(only leaf quotas run jobs)"
            )
