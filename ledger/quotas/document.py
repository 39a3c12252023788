"""The quota tree file format: a parsed document (a list of nodes) into a :class:`QuotaTree`.

YAML is read at the edge (:func:`dlc_ledger.services.yaml_files.parse_quota_tree`); this
checks every field of every node, fills an inner node's missing ``min`` with its children's,
and validates the result (:mod:`ledger.quotas.validate`). The format is ``docs/quotas.md``'s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from pydantic import ValidationError

from ledger.bounds import MAX_LABEL_VALUE, OutOfBounds, check_name
from ledger.events import QuotaSpec
from ledger.quotas.model import QuotaTree, QuotaTreeError, children_of, resource_unit, tree_order
from ledger.quotas.validate import refuse_cycles, validate_tree

__all__ = ["QUEUE_POLICIES", "build_quota_tree", "quota_tree_from_document"]

# matched whole (fullmatch): ``$`` would also match before a trailing newline
_KEY = re.compile(r"(gpu/[A-Za-z0-9][A-Za-z0-9._-]*|cpu|memory)")
_NAME = re.compile(r"[a-z0-9]([a-z0-9._-]{0,251}[a-z0-9])?")
_NODE_FIELDS = frozenset(
    {
        "name",
        "parent",
        "min",
        "max",
        "lend_limit",
        "preemption",
        "queue_policy",
        "balance_timeout",
        "aging_interval",
        "on_unfit_head",
        "fair_sharing_weight",
        "fair_sharing",
        "workspaces",
        "resource_groups",
    }
)
_GROUP = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")
_QUEUE_POLICIES = (
    "FIFO",
    "RoundRobin",
    "Balance",
    "Intelligent",
    "StrictFIFO",
    "BestEffortFIFO",
    "Priority",
)
_UNFIT_HEAD = ("Retry", "Skip")
#: the queue policies a quota may name (docs/quotas.md)
QUEUE_POLICIES = _QUEUE_POLICIES


def quota_tree_from_document(raw: Any) -> QuotaTree:
    """A quota tree from its parsed file (YAML is read at the edge:
    :func:`dlc_ledger.services.yaml_files.parse_quota_tree`): a list of nodes, or a mapping
    with a ``quotas`` list."""
    if isinstance(raw, dict):
        unknown = sorted(set(raw) - {"quotas"})
        if unknown:
            raise QuotaTreeError(f"unknown top-level field(s) {unknown}; expected 'quotas'")
        raw = raw.get("quotas")
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise QuotaTreeError("a quota tree is a list of quota nodes (or {quotas: [...]})")
    return build_quota_tree(raw)


def _quantities(name: str, what: str, value: Any) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise QuotaTreeError(f"quota {name!r}: {what} must be a mapping of resource -> quantity")
    out: dict[str, int] = {}
    for key, qty in value.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise QuotaTreeError(
                f"quota {name!r}: {what}: unknown resource key {key!r} "
                "(expected gpu/<model>, gpu/any, cpu or memory)"
            )
        if isinstance(qty, bool) or not isinstance(qty, int) or qty < 0:
            raise QuotaTreeError(
                f"quota {name!r}: {what}.{key}: {qty!r} is not a non-negative integer "
                f"({key} is counted in {resource_unit(key)})"
            )
        out[key] = qty
    return out


def _seconds(name: str, what: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise QuotaTreeError(
            f"quota {name!r}: {what}: {value!r} is not a positive number of seconds"
        )
    return value


def _queue_fields(name: str, node: dict[str, Any]) -> dict[str, Any]:
    """The queue policy and fair-sharing fields, checked here for messages an operator
    can act on (pydantic would coerce ``"10"`` and ``1.0``)."""
    policy = node.get("queue_policy", "BestEffortFIFO")
    if policy not in _QUEUE_POLICIES:
        raise QuotaTreeError(
            f"quota {name!r}: queue_policy {policy!r} is not one of {', '.join(_QUEUE_POLICIES)}"
        )
    unfit = node.get("on_unfit_head", "Retry")
    if unfit not in _UNFIT_HEAD:
        raise QuotaTreeError(
            f"quota {name!r}: on_unfit_head {unfit!r} is not one of {', '.join(_UNFIT_HEAD)}"
        )
    weight = node.get("fair_sharing_weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
        raise QuotaTreeError(
            f"quota {name!r}: fair_sharing_weight: {weight!r} is not a number >= 0"
        )
    fair = node.get("fair_sharing", False)
    if not isinstance(fair, bool):
        raise QuotaTreeError(f"quota {name!r}: fair_sharing: {fair!r} is not true or false")
    return {
        "queue_policy": policy,
        "balance_timeout": _seconds(name, "balance_timeout", node.get("balance_timeout")),
        "aging_interval": _seconds(name, "aging_interval", node.get("aging_interval")),
        "on_unfit_head": unfit,
        # through str: a YAML float 0.1 is the decimal 0.1, not its binary neighbour
        "fair_sharing_weight": Decimal(str(weight)),
        "fair_sharing": fair,
    }


def build_quota_tree(nodes: Sequence[Any]) -> QuotaTree:
    """Validate plain node mappings (as parsed from YAML) into a :class:`QuotaTree`."""
    raw_nodes: dict[str, dict[str, Any]] = {}
    explicit_min: dict[str, bool] = {}
    bindings: dict[str, str] = {}
    for index, node in enumerate(nodes):
        if not isinstance(node, dict):
            raise QuotaTreeError(f"quota node #{index + 1} is not a mapping")
        name = node.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise QuotaTreeError(
                f"quota node #{index + 1}: name {name!r} must be lower-case letters, digits, "
                "'-', '_' or '.' (at most 253)"
            )
        unknown = sorted(set(node) - _NODE_FIELDS)
        if unknown:
            raise QuotaTreeError(
                f"quota {name!r}: unknown field(s) {unknown} (known: {sorted(_NODE_FIELDS)})"
            )
        if name in raw_nodes:
            raise QuotaTreeError(f"quota {name!r} is defined twice")
        parent = node.get("parent")
        if parent is not None and not isinstance(parent, str):
            raise QuotaTreeError(f"quota {name!r}: parent must be a quota name")
        workspaces = node.get("workspaces") or []
        if not isinstance(workspaces, list) or not all(
            isinstance(w, str) and w for w in workspaces
        ):
            raise QuotaTreeError(f"quota {name!r}: workspaces must be a list of names")
        for ws in workspaces:  # a binding introduces the workspace: its name is checked here
            try:
                check_name(ws, f"quota {name!r}: workspaces", MAX_LABEL_VALUE)
            except OutOfBounds as exc:
                raise QuotaTreeError(str(exc)) from None
        for ws in workspaces:
            if ws in bindings:
                raise QuotaTreeError(
                    f"workspace {ws!r} is bound to both {bindings[ws]!r} and {name!r}"
                )
            bindings[ws] = name
        groups = node.get("resource_groups") or []
        if not isinstance(groups, list) or not all(
            isinstance(g, str) and _GROUP.fullmatch(g) for g in groups
        ):
            raise QuotaTreeError(
                f"quota {name!r}: resource_groups must be a list of resource group names"
            )
        explicit_min[name] = "min" in node
        raw_nodes[name] = {
            "quota_id": name,
            "parent": parent,
            "min": _quantities(name, "min", node.get("min")),
            "max": _quantities(name, "max", node.get("max")),
            "lend_limit": _quantities(name, "lend_limit", node.get("lend_limit")),
            "preemption": node.get("preemption") or {},
            "resource_groups": tuple(sorted(set(groups))),
            **_queue_fields(name, node),
        }
    for name, node in raw_nodes.items():
        if node["parent"] is not None and node["parent"] not in raw_nodes:
            raise QuotaTreeError(f"quota {name!r}: unknown parent {node['parent']!r}")
    refuse_cycles({n: v["parent"] for n, v in raw_nodes.items()})

    # an inner node without a min guarantees exactly its children's mins (README)
    children = children_of({n: v["parent"] for n, v in raw_nodes.items()})
    for name in reversed(tree_order({n: v["parent"] for n, v in raw_nodes.items()})):
        if not explicit_min[name] and children.get(name):
            total: dict[str, int] = {}
            for child in children[name]:
                for key, qty in raw_nodes[child]["min"].items():
                    total[key] = total.get(key, 0) + qty
            raw_nodes[name]["min"] = total

    specs: dict[str, QuotaSpec] = {}
    for name, node in raw_nodes.items():
        try:
            specs[name] = QuotaSpec.model_validate(node)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise QuotaTreeError(f"quota {name!r}: {where}: {err['msg']}") from exc
    tree = QuotaTree(specs=specs, bindings=bindings)
    validate_tree(tree)
    return tree
