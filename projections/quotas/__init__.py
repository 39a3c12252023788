"""Quota usage over cluster time: the tree, raw per-leaf changes, and the figures read
from them (used, borrowed, lent, queued demand) at an instant, per node, over a window.

``projection`` folds the facts into the tables; ``reads`` sums them at an instant or over
a window; ``kinds`` splits a node's used into training, services and notebooks;
``nodes`` gives every node of the tree its figures; ``scope`` narrows a read to a
workspace token's subtree.
"""

from __future__ import annotations

from projections.quotas.kinds import KINDS, used_by_kind
from projections.quotas.nodes import NodeFlavor, QuotaNodes, quota_nodes_at
from projections.quotas.projection import QuotaProjection
from projections.quotas.reads import (
    STEPS,
    UsageRow,
    quota_tree,
    series_points,
    specs_at,
    usage_at,
    usage_history,
    usage_series,
)
from projections.quotas.scope import quota_in_scope, quota_subtree, subtree_condition

__all__ = [
    "KINDS",
    "STEPS",
    "NodeFlavor",
    "QuotaNodes",
    "QuotaProjection",
    "UsageRow",
    "quota_in_scope",
    "quota_nodes_at",
    "quota_subtree",
    "quota_tree",
    "series_points",
    "specs_at",
    "subtree_condition",
    "usage_at",
    "usage_history",
    "usage_series",
    "used_by_kind",
]
