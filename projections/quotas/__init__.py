"""Quota usage over cluster time: the tree, raw per-leaf changes, and the figures read
from them (used, borrowed, lent, queued demand) at an instant, per node, over a window.

``projection`` folds the facts into the tables; ``reads`` sums them at an instant or over
a window; ``nodes`` gives every node of the tree its figures; ``scope`` narrows a read to a
workspace token's subtree.
"""

from __future__ import annotations

from projections.quotas.reads import quota_tree, specs_at
from projections.quotas.scope import subtree_condition

__all__ = ["quota_tree", "specs_at", "subtree_condition"]
