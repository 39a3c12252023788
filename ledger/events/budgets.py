"""Budgets: set, removed, and a workspace's spend crossing one."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
)

from ledger.envelopes import EventData, event_type
from ledger.events.common import (
    LabelValue,
    Name,
    NonNegative,
)

__all__ = ["BudgetAction", "BudgetExceeded", "BudgetPeriod", "BudgetRemoved", "BudgetSet"]


BudgetAction = Literal["notify", "stop"]
BudgetPeriod = Literal["month"]


@event_type("BudgetSet")
class BudgetSet(EventData):
    """A workspace's spending limit per period (``dlc-ledger budgets apply``), in integer
    minor units at ``scale`` (the billing scale of ``currency`` when it was applied)."""

    workspace: LabelValue = Name
    amount_minor: int = NonNegative
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    scale: int = Field(ge=0, le=6)
    period: BudgetPeriod = "month"
    action: BudgetAction = "notify"


@event_type("BudgetRemoved")
class BudgetRemoved(EventData):
    workspace: LabelValue = Name


@event_type("BudgetExceeded")
class BudgetExceeded(EventData):
    """The workspace's posted cost in ``period`` crossed its budget (at ``occurred_at``).

    ``budget_event_id`` names the ``BudgetSet`` it crossed: a raised budget is a new one,
    crossed (or not) on its own. The optional fields are additive (docs/billing.md)."""

    workspace: str = Name
    budget_minor: int
    spent_minor: int
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    period: str | None = None
    action: BudgetAction | None = None
    budget_event_id: str | None = None
