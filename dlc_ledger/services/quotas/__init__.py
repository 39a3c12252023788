"""The quotas context's use cases: apply a quota file, the tree as applied, its draws on
subscription groups and capacity (:mod:`.trees`), and the check that a workspace named by a
command is one the ledger knows (:mod:`.workspaces`, also asked by budgets, subscriptions
and tokens). The rules are :mod:`ledger.quotas`, the view :mod:`projections.quotas`."""

from dlc_ledger.services.quotas.trees import (
    add_quota,
    apply_quota_file,
    current_tree,
    draw_on_groups,
    format_quantities,
    lands_inside_history,
    over_capacity_quotas,
)
from dlc_ledger.services.quotas.workspaces import refuse_unknown_workspaces

__all__ = [
    "add_quota",
    "apply_quota_file",
    "current_tree",
    "draw_on_groups",
    "format_quantities",
    "lands_inside_history",
    "over_capacity_quotas",
    "refuse_unknown_workspaces",
]
