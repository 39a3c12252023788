"""Budgets per workspace and month: the budgets in force, what was spent against them, and
which budgets were crossed (``projection``)."""

from __future__ import annotations

from projections.budgets.projection import (
    BudgetInForce,
    BudgetsProjection,
    budgets_at,
    crossing_instant,
    current_budgets,
    exceeded_budgets,
    exhausted_workspaces,
    jobs_to_stop,
    spent_by_workspace,
)

__all__ = [
    "BudgetInForce",
    "BudgetsProjection",
    "budgets_at",
    "crossing_instant",
    "current_budgets",
    "exceeded_budgets",
    "exhausted_workspaces",
    "jobs_to_stop",
    "spent_by_workspace",
]
