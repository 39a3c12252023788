"""The budgets context's use cases: apply a budget file, show budgets against what was
spent, check them (:mod:`.budgets`). The crossing check itself is the context's process
step (:mod:`processes.budgets`), the rules :mod:`ledger.budgets`, the view
:mod:`projections.budgets`."""

from dlc_ledger.services.budgets.budgets import (
    BudgetStatus,
    apply_budget_file,
    budget_statuses,
    budget_statuses_on,
    check,
    default_instant,
)

__all__ = [
    "BudgetStatus",
    "apply_budget_file",
    "budget_statuses",
    "budget_statuses_on",
    "check",
    "default_instant",
]
