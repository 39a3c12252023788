"""Response models of the jobs, events and report routes, so the OpenAPI document states
every field a client reads (and schemathesis can hold each response to it).

The read functions return JSON-ready dicts (shared with the CLI's ``--format json``);
these models only describe and check them: a route that starts returning a field not
declared here fails its tests rather than drifting silently from the document. Fields a
row carries only sometimes (``at`` on an as-at listing, a group key not grouped by, the
credit columns of ``net_credits``) are optional and the routes leave them out when unset
(``response_model_exclude_unset``), so the bodies are exactly what the read functions
produced.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from projections.jobs import STATUSES

__all__ = [
    "CostRow",
    "CostRows",
    "DecimalText",
    "Event",
    "EventPage",
    "Freshness",
    "Job",
    "JobCost",
    "JobDetail",
    "JobPage",
    "ListedJob",
    "Number",
    "Occupied",
    "PreciseMinor",
    "Strict",
    "TimelineEntry",
    "TimelinePage",
    "Timestamp",
    "UsageRow",
    "UsageRows",
]

Timestamp = Annotated[
    str, Field(json_schema_extra={"format": "date-time"}, examples=["2026-11-01T00:00:00Z"])
]
#: an amount at full precision in minor units, as a decimal string (never a float)
PreciseMinor = Annotated[str, Field(pattern=r"^-?[0-9]+(\.[0-9]+)?$", examples=["240.5"])]
#: a decimal figure (GPU-hours, seconds, a share) as a string, so no float rounds it
DecimalText = Annotated[str, Field(pattern=r"^-?[0-9]+(\.[0-9]+)?$", examples=["1.2500"])]
Number = int | float  # int where the figure is whole: an int stays an int in the body


class Strict(BaseModel):
    """A response body's part: a field not declared here is an error, not a silent drift."""

    model_config = ConfigDict(extra="forbid")


class Freshness(Strict):
    """How current the read models were for this response (docs/api.md, "Freshness")."""

    head: int = Field(description="The store's head position.")
    projected: int = Field(description="The lowest position every read model has projected.")
    behind: int = Field(description="Events not yet projected (0: current).")


class Job(Strict):
    """A job as ``jobs list`` shows it (the jobs read model)."""

    job_uid: str
    name: str | None
    namespace: str | None
    kind: str | None
    framework: str | None
    workspace: str | None
    quota: str | None
    user: str | None
    priority: int | None
    billing_mode: str | None
    replicas: list[dict[str, Any]]
    status: str = Field(json_schema_extra={"enum": list(STATUSES)})
    status_since: Timestamp
    entered: dict[str, Timestamp] = Field(description="Status -> when the job first entered it.")
    submitted_at: Timestamp | None
    ended_at: Timestamp | None
    deleted_at: Timestamp | None
    restarts: int
    preemptions: int
    goodput: Number | None
    running_seconds: Number
    open_occupancies: int
    at: Timestamp | None = Field(
        default=None, description="Only on a listing with ?at=: the instant shown."
    )


class ListedJob(Job):
    """A job of ``/v1/jobs``: what ``jobs list`` shows, with its GPU and cost figures
    (:mod:`dlc_ledger.presenters.job_figures`)."""

    gpu_request_mgpu: int = Field(description="Its replicas' count x mGPU, summed.")
    gpu_model: str | None = Field(
        description="The GPU model its replicas name, else the models it ran on; null: unknown."
    )
    mgpu_seconds: int = Field(description="GPU time occupied so far (report usage).")
    gpu_hours: DecimalText = Field(description="mgpu_seconds / 3,600,000, to 6 decimals.")
    cost_minor: int = Field(description="Posted to the ledger so far (report cost by job).")
    cost_minor_precise: PreciseMinor
    currency: str | None = Field(description="null: no price book and no cost.")
    scale: int | None = None
    cost_display: str | None = None


class JobPage(Strict):
    items: list[ListedJob]
    next_cursor: str | None = None
    freshness: Freshness | None = None


class Occupied(Strict):
    """Resource-seconds of the job's closed occupancies, per flavor."""

    flavor: str | None
    mgpu_seconds: Number
    cpu_milli_seconds: Number
    memory_mib_seconds: Number
    occupancies: int


class TimelineEntry(Strict):
    position: int
    occurred_at: Timestamp
    type: str
    summary: str
    source: str
    by: str | None
    reason: str | None
    stream: str
    event_id: str
    late: bool = Field(description="Recorded after a later fact about the job.")


class TimelinePage(Strict):
    items: list[TimelineEntry]
    next_cursor: str | None = None
    freshness: Freshness | None = None


class JobCost(Strict):
    """Cost per flavor x billing mode: posted to the ledger, and rated now."""

    flavor: str
    billing_mode: str
    currency: str
    posted_minor: int
    posted_minor_precise: PreciseMinor
    rated_minor: int | None
    rated_minor_precise: PreciseMinor | None
    scale: int
    posted_display: str
    rated_display: str | None = None


class JobDetail(Job):
    occupied: list[Occupied]
    timeline: list[TimelineEntry]
    cost: list[JobCost]
    freshness: Freshness | None = None


class Event(Strict):
    """A stored event as recorded."""

    position: int
    event_id: str
    stream: str
    version: int
    type: str
    schema_version: int
    occurred_at: Timestamp
    observed_at: Timestamp
    recorded_at: Timestamp
    source: str
    causation_id: str | None
    correlation_id: str | None
    data: dict[str, Any]
    hash: str = Field(pattern=r"^[0-9a-f]{64}$", description="The chain hash, hex.")


class EventPage(Strict):
    items: list[Event]
    next_cursor: str | None = None
    freshness: Freshness | None = None


class _Grouped(Strict):
    """The group keys: present when grouped by, absent otherwise."""

    workspace: str | None = None
    quota: str | None = None
    user: str | None = None
    flavor: str | None = None
    billing_mode: str | None = None
    day: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}$")
    month: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}$")
    job: str | None = None
    #: training, service or notebook (or an invoice's rounding / subscriptions group)
    kind: str | None = None
    #: a service's namespace/name; "-": any other job
    service: str | None = None


class UsageRow(_Grouped):
    mgpu_seconds: Number
    cpu_milli_seconds: Number
    memory_mib_seconds: Number


class UsageRows(Strict):
    items: list[UsageRow]
    next_cursor: str | None = None
    freshness: Freshness | None = None


class CostRow(_Grouped):
    cost_minor: int
    cost_minor_precise: PreciseMinor
    credited_minor: int | None = Field(default=None, description="With net_credits only.")
    net_minor: int | None = Field(default=None, description="With net_credits only.")
    prepaid_minor: int | None = Field(
        default=None,
        description="With with_prepaid only: the subscriptions' recognised revenue of the "
        "window attributed to the group by guarantee (docs/subscriptions.md).",
    )
    currency: str
    scale: int
    cost_display: str
    credited_display: str | None = None
    net_display: str | None = None
    prepaid_display: str | None = None


class CostRows(Strict):
    items: list[CostRow]
    next_cursor: str | None = None
    freshness: Freshness | None = None
