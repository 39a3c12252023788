"""A quota tree reshaped for a what-if replay: another queue policy, a share of the capacity.

A what-if replays a trace through the dispatcher under a tree that differs from the real one
in one stated way: every queue under one policy (``--policy FIFO``), or every quantity
scaled (``--scale-quotas 0.25``: the same tree with a quarter of the GPUs, so that a quiet
window of the trace contends). Both work on the parsed file (before validation), so the
reshaped tree is checked exactly as a file an operator applies.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from ledger.quotas.model import QuotaTreeError

__all__ = ["QUANTITY_FIELDS", "reshaped_document"]

#: the fields of a quota node that hold resource quantities
QUANTITY_FIELDS = ("min", "max", "lend_limit")


def _nodes(raw: Any) -> list[dict[str, Any]]:
    nodes = raw.get("quotas") if isinstance(raw, dict) else raw
    if not isinstance(nodes, list) or not all(isinstance(n, dict) for n in nodes):
        raise QuotaTreeError("a quota tree is a list of quota nodes (or {quotas: [...]})")
    return nodes


def _scaled(quantities: Any, factor: Decimal) -> Any:
    if not isinstance(quantities, dict):
        return quantities  # left for the tree's own validation to refuse
    return {
        key: int((Decimal(qty) * factor).to_integral_value(ROUND_HALF_UP))
        if isinstance(qty, int) and not isinstance(qty, bool)
        else qty
        for key, qty in quantities.items()
    }


def reshaped_document(
    raw: Any, *, policy: str | None = None, scale: Decimal | None = None
) -> dict[str, Any]:
    """``raw`` (a parsed quota file) with every leaf queue (a quota binding workspaces, or
    without children) under ``policy`` and every quantity times ``scale`` (rounded half up);
    the policy's own timers (``balance_timeout``, ``aging_interval``) are kept."""
    if scale is not None and not (Decimal(0) < scale <= Decimal(1000)):
        raise QuotaTreeError(f"a quota scale is a number above 0 (and at most 1000), not {scale}")
    nodes = [dict(n) for n in _nodes(raw)]
    parents = {n.get("parent") for n in nodes}
    for node in nodes:
        if scale is not None:
            for name in QUANTITY_FIELDS:
                if name in node:
                    node[name] = _scaled(node[name], scale)
        if policy is not None and (node.get("workspaces") or node.get("name") not in parents):
            node["queue_policy"] = policy
    return {"quotas": nodes}
