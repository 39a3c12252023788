"""Response models of the quota routes (``/v1/quotas/tree``, ``/v1/quotas/{quota}/series``,
``/v1/queues/{quota}``), so the OpenAPI document states each figure a dashboard reads.

The rows are shaped once for the CLI and the API (:mod:`dlc_ledger.presenters.quota_rows`,
:func:`projections.dispatch.queues.queue_listing`); these models describe and check them.
The tree's window figures (GPU-hours and cost) exist only with ``from``/``to``, and its
money display only when the window has a cost: those fields are optional and left out
when unset (``response_model_exclude_unset``), so a body is what the rows held.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from dlc_ledger.api.models import DecimalText, Freshness, Number, Strict, Timestamp
from ledger.dispatch.estimates import Basis

__all__ = [
    "QueueEntry",
    "QueuePage",
    "QuotaNodeRow",
    "QuotaTreePage",
    "SeriesPage",
    "SeriesPoint",
]

Unit = Annotated[
    str, Field(description="The flavor's unit: mGPU, milli-cores or MiB ('' without a flavor).")
]


class QuotaNodeRow(Strict):
    """One node x flavor of the quota tree (leaves and inner nodes alike), in the
    flavor's unit."""

    quota: str
    parent: str | None
    flavor: str
    min: int
    max: int
    used: int
    used_training: int = Field(description="Of used, by training jobs.")
    used_service: int = Field(description="Of used, by inference services' replicas.")
    used_notebook: int = Field(description="Of used, by notebooks.")
    borrowed: int = Field(description="Used beyond min, from the cohort.")
    lent: int = Field(description="Of min, used by others in the cohort.")
    lendable: int = Field(description="What the node could lend now.")
    available: int = Field(description="What one more job could be admitted with here.")
    queued: int = Field(description="Demand of the subtree's pending jobs.")
    pending_jobs: int
    running_jobs: int
    over_admitted: int
    unit: Unit
    at: Timestamp
    mgpu_seconds: int | None = Field(default=None, description="With from/to only.")
    gpu_hours: DecimalText | None = Field(default=None, description="With from/to only.")
    cost_minor: int | None = Field(default=None, description="With from/to only.")
    currency: str | None = Field(default=None, description="With from/to only.")
    scale: int | None = Field(default=None, description="With a window's cost only.")
    cost_display: str | None = Field(default=None, description="With a window's cost only.")


class QuotaTreePage(Strict):
    """The tree's node x flavor rows, tree order, at ``at`` (null: nothing recorded)."""

    items: list[QuotaNodeRow]
    next_cursor: str | None = None
    freshness: Freshness | None = None
    at: Timestamp | None = None


class SeriesPoint(Strict):
    """A quota x flavor at one step of the series, in the flavor's unit."""

    at: Timestamp
    quota: str
    flavor: str
    min: int
    max: int
    used: int
    borrowed: int
    lent: int
    queued: int
    running_jobs: int
    over_admitted: int
    unit: Unit
    pending_jobs: int


class SeriesPage(Strict):
    items: list[SeriesPoint]
    next_cursor: str | None = None
    freshness: Freshness | None = None


class QueueEntry(Strict):
    """A pending job in the order the dispatcher would try it now."""

    position: int = Field(description="In its own quota's queue, from 1.")
    cohort_position: int = Field(description="In its whole tree, from 1.")
    job_uid: str
    name: str
    workspace: str | None
    quota: str
    priority: int
    effective_priority: int = Field(description="The priority it is ordered by (aged).")
    queued_at: Timestamp
    waited_seconds: Number
    reason: str
    request: dict[str, Number] = Field(description="Flavor or resource -> quantity.")
    estimated_start: Timestamp | None
    estimated_start_low: Timestamp | None = Field(
        description='The start range\'s low percentile (docs/dispatch.md, "Why?").'
    )
    estimated_start_high: Timestamp | None = Field(
        description="The range's high percentile; null with a low: no upper bound."
    )
    estimate_basis: Basis | None


class QueuePage(Strict):
    """A queue page; ``now``: the instant waits and estimates are taken at."""

    items: list[QueueEntry]
    next_cursor: str | None = None
    freshness: Freshness | None = None
    now: Timestamp | None = None
