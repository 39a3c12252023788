"""Response models of the routes a dashboard reads at a glance: ``/v1/cost/top``,
``/v1/month-to-date``, ``/v1/budgets`` and ``/v1/extent``, so the OpenAPI document
states every field a client reads.

Money as everywhere (:func:`dlc_ledger.presenters.money_fields`): ``<name>_minor``
(integer minor units) with ``currency``, ``scale`` and ``<name>_display``;
``cost_minor_precise`` at full precision. A top list's item holds the key it is grouped
by (and, by job, what the job is); the others are left out (``response_model_exclude_unset``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from dlc_ledger.api.models import DecimalText, Freshness, PreciseMinor, Strict, Timestamp
from projections.jobs import STATUSES

__all__ = [
    "BudgetCrossing",
    "BudgetPage",
    "BudgetRow",
    "BudgetState",
    "CostTopItem",
    "CostTopPage",
    "CostTotal",
    "CostWindow",
    "Extent",
    "MonthToDatePage",
    "MonthToDateRow",
]

Month = Annotated[str, Field(pattern=r"^\d{4}-(0[1-9]|1[0-2])$", examples=["2026-11"])]


class CostTopItem(Strict):
    """One group of a top list: its key (the one grouped by), GPU time and cost."""

    job: str | None = Field(default=None, description="by=job: the job's uid.")
    user: str | None = None
    quota: str | None = None
    workspace: str | None = None
    name: str | None = Field(default=None, description="by=job: the job's name.")
    status: str | None = Field(default=None, json_schema_extra={"enum": [*STATUSES, None]})
    gpu_request_mgpu: int | None = Field(
        default=None, description="by=job: its replicas' count x mGPU, summed."
    )
    gpu_model: str | None = Field(
        default=None,
        description="by=job: the GPU model its replicas name, else the models it ran on.",
    )
    mgpu_seconds: int = Field(description="GPU time occupied in the window (report usage).")
    gpu_hours: DecimalText = Field(description="mgpu_seconds / 3,600,000, to 6 decimals.")
    cost_minor: int
    cost_minor_precise: PreciseMinor
    currency: str
    scale: int
    cost_display: str


class CostTotal(Strict):
    """The whole window (every group, not only the top): cost summed exactly and rounded
    once, as ``report cost`` without group keys shows it."""

    mgpu_seconds: int
    gpu_hours: DecimalText
    cost_minor: int
    cost_minor_precise: PreciseMinor
    currency: str | None = Field(description="null: no price book and no cost.")
    scale: int | None = None
    cost_display: str | None = None


class CostWindow(Strict):
    """The window asked for (null: open on that side)."""

    start: Timestamp | None = Field(alias="from")
    end: Timestamp | None = Field(alias="to")


class CostTopPage(Strict):
    count: int = Field(description="Groups in the window (all, not only those listed).")
    total: CostTotal
    window: CostWindow
    items: list[CostTopItem]
    next_cursor: str | None = Field(default=None, description="Always null: n is the list.")
    freshness: Freshness | None = None


class BudgetState(Strict):
    """A budget in force against the posted cost of its period (``budgets show``)."""

    period: Month
    action: Literal["notify", "stop"]
    state: Literal["ok", "exceeded"]
    exhausted: bool = Field(description="A stop budget's crossing is stored.")
    limit_minor: int
    spent_minor: int
    left_minor: int = Field(description="Limit less spent: negative once exceeded.")
    currency: str
    scale: int
    limit_display: str
    spent_display: str
    left_display: str


class MonthToDateRow(Strict):
    """A workspace's month so far (docs/api.md, "Month to date")."""

    workspace: str
    month: Month
    start: Timestamp = Field(alias="from", description="The month's first instant.")
    as_of: Timestamp = Field(description="The instant read up to (cluster time).")
    cost_minor: int
    cost_minor_precise: PreciseMinor
    forecast_minor: int
    prepaid_minor: int | None = Field(
        default=None,
        description="With with_prepaid only: what the workspace's subscribed capacity cost "
        "this month so far (recognised revenue attributed by guarantee).",
    )
    currency: str | None
    scale: int | None = None
    cost_display: str | None = None
    forecast_display: str | None = None
    prepaid_display: str | None = None
    budget: BudgetState | None


class MonthToDatePage(Strict):
    at: Timestamp | None = Field(description="The instant read; null: the store holds no data.")
    items: list[MonthToDateRow]
    next_cursor: str | None = None
    freshness: Freshness | None = None


class BudgetCrossing(Strict):
    """A stored ``BudgetExceeded``: when posted cost went over the budget, spent then."""

    at: Timestamp
    action: Literal["notify", "stop"] | None
    limit_minor: int
    spent_minor: int
    currency: str
    scale: int
    limit_display: str
    spent_display: str


class BudgetRow(BudgetState):
    workspace: str
    since: Timestamp = Field(description="When the budget took effect.")
    thresholds_crossed: list[BudgetCrossing]


class BudgetPage(Strict):
    at: Timestamp
    items: list[BudgetRow]
    next_cursor: str | None = None
    freshness: Freshness | None = None


class Extent(Strict):
    """The cluster time the store holds, and where it came from."""

    first: Timestamp | None = Field(description="Earliest cluster fact; null: none.")
    last: Timestamp | None = Field(description="Latest cluster fact: the cluster clock.")
    replayed: bool = Field(description="Facts of a replayed trace (cluster replay-<trace>).")
    clusters: list[str]
    run: str | None = Field(description="The label the server was started with, if any.")
    freshness: Freshness | None = None
