"""Budgets per workspace and month: the budgets in force, what was spent against them, and
which budgets were crossed (``projection``)."""
