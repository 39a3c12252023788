"""The budgets context's process step: the budget check, which appends a crossing's
``BudgetExceeded`` and its notification, and gates the dispatcher on stop budgets."""

from processes.budgets.checks import BudgetBreach, StoreBudgetGate, check_budgets

__all__ = ["BudgetBreach", "StoreBudgetGate", "check_budgets"]
