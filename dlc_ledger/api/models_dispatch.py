"""Response models of the dispatcher's routes (``/v1/jobs/{uid}/why``, ``/v1/waits``,
``/v1/preemptions``, ``/v1/goodput``), so the OpenAPI document states what a client reads.

The documents come from the read functions the CLI prints too
(:func:`projections.dispatch.explain.explain_job`, :mod:`projections.dispatch.reports`);
these models describe and check them. A ``why`` document's parts depend on its
``answer`` (``pending`` only for a pending job, ``projected_end`` and ``runtime`` only
for an admitted or running one): they are optional and left out when unset
(``response_model_exclude_unset``), as are the money display fields of a preemption
without a cost.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dlc_ledger.api.models import DecimalText, Freshness, Number, PreciseMinor, Strict, Timestamp
from ledger.dispatch.estimates import Basis
from projections.jobs import STATUSES

__all__ = [
    "Admission",
    "BlockingFigure",
    "GoodputPage",
    "GoodputRow",
    "LastPending",
    "PendingPart",
    "PreemptionPage",
    "PreemptionRow",
    "Runtime",
    "StartEstimate",
    "Stopped",
    "WaitsPage",
    "WaitsRow",
    "Why",
    "WhyPreemption",
    "WhyRefusal",
    "WhyReplicas",
]

#: quota -> figure (``gpu/any.used``, ``gpu/any.min``, ...) -> quantity, as the decision
#: recorded it
QuotaState = dict[str, dict[str, int]]
Answer = Literal[
    "pending",
    "unplaced",
    "finished",
    "preempted",
    "not queued",
    "running",
    "admitted",
    "refused",
]


class Runtime(Strict):
    """An expected run time: the median of comparable finished jobs' run times, its range's
    percentiles, and whose."""

    seconds: Number = Field(description="The median whole run time (s).")
    low_seconds: Number = Field(description="The range's low percentile (s).")
    high_seconds: Number = Field(description="The range's high percentile (s).")
    scope: Literal["quota", "workspace", "all", "tail", "max"] = Field(
        description="Whose finished jobs: a quota's, a workspace's, all; tail: too few "
        "comparable jobs ran as long (a heavy tail from its age: as long again at the "
        "median); max: none known, it runs to its declared maximum."
    )
    name: str = Field(description="The quota or workspace ('' for all).")
    gpus: int | None = Field(
        description="The GPU class matched (0 none, 1 up to one GPU, 2 two, 3 up to four, "
        "4 up to eight, ...); null: any."
    )
    jobs: int = Field(description="How many finished jobs it rests on.")
    longer_than: Number = Field(description="Of the jobs that ran at least this long (s).")
    tail_from: Number | None = Field(
        description="Scope tail: too few comparable jobs ran as long, P(run > x) = "
        "tail_from / x beyond it (s)."
    )
    max_run_seconds: Number | None = Field(description="The job's declared maximum run time.")


class StartEstimate(Strict):
    start: Timestamp | None
    in_seconds: Number | None
    basis: Basis
    steps: int = Field(description="Simulated dispatch cycles until it was decided.")
    released: int = Field(description="Running jobs released at their projected ends first.")
    low: Timestamp | None = Field(
        description="The range: the low percentile start of the simulated futures."
    )
    high: Timestamp | None = Field(
        description="The range's high percentile start; null with a low: no upper bound."
    )


class BlockingFigure(Strict):
    """A quota's figure for one resource the job requests, and whether it falls short."""

    quota: str
    key: str
    request: Number
    min: Number
    max: Number | None
    used: Number
    available: Number
    capacity: Number
    short: bool


class LastPending(Strict):
    """The dispatcher's latest stored pending decision about the current wait."""

    decided_at: Timestamp
    reason: str | None
    position: int | None
    cohort_position: int | None
    estimated_start: Timestamp | None
    estimated_start_low: Timestamp | None
    estimated_start_high: Timestamp | None


class Stopped(Strict):
    """The dispatcher stopped the job at its declared maximum run time (or a running
    service or notebook: its budget exhausted, its subscription released)."""

    decided_at: Timestamp
    reason: str | None = Field(
        description="MaxRunTimeExceeded; a service's or notebook's BudgetExhausted or "
        "SubscriptionExpired (no ran/max seconds: it was scaled to none)."
    )
    ran_seconds: int | None
    max_run_seconds: int | None


class PendingPart(Strict):
    reason: str | None = Field(description="Tiered pending reason; null: it fits now.")
    reason_text: str
    position: int | None
    queue_length: int
    cohort_position: int | None
    cohort_length: int
    queued_at: Timestamp
    waited_seconds: Number
    priority: int
    effective_priority: int
    request: dict[str, Number]
    figures: list[BlockingFigure]
    estimate: StartEstimate | None
    estimate_method: str
    runtime: Runtime | None
    last_decision: LastPending | None


class Admission(Strict):
    decided_at: Timestamp
    quota: str | None
    borrowing: bool
    spillover: bool = Field(
        default=False,
        description="A service replica admitted on public resources, beyond its quota.",
    )
    state: QuotaState


class WhyPreemption(Strict):
    """One preemption of the job: by whom (null outside a scoped caller's workspaces),
    which rule, the quota state then, and the work lost with its cost."""

    decided_at: Timestamp
    preemptor: str | None
    preemptor_name: str | None
    preemptor_priority: int | None
    preemptor_quota: str | None
    rule: str
    rule_text: str
    victim_quota: str | None
    other_victims: list[str]
    state: QuotaState
    lost_seconds: Number
    lost_gpu_hours: Number
    currency: str | None
    lost_cost_minor: int | None
    lost_cost_minor_precise: PreciseMinor | None
    scale: int | None = Field(default=None, description="With a cost only.")
    lost_cost_display: str | None = Field(default=None, description="With a cost only.")


class WhyReplicas(Strict):
    """A service's or notebook's replicas, each a unit of admission (``<uid>#<index>``)."""

    running: list[str] = Field(description="Replicas holding pods.")
    waiting: list[str] = Field(description="Desired replicas waiting for admission.")
    refused: list[str] = Field(description="A notebook's replica refused at start.")
    spilled: list[str] = Field(
        default_factory=list,
        description="Replicas admitted on public resources, beyond the quota (spillover).",
    )


class WhyRefusal(Strict):
    """Why a notebook was refused at start (it is not queued)."""

    reason: str = Field(
        json_schema_extra={
            "enum": [
                "InsufficientQuota",
                "ExceedsMaxQuota",
                "BudgetExhausted",
                "SubscriptionExpired",
            ]
        }
    )
    reason_text: str


class Why(Strict):
    """Why a job is where it is at ``now``."""

    job_uid: str
    name: str | None
    status: str = Field(json_schema_extra={"enum": list(STATUSES)})
    status_since: Timestamp
    quota: str | None
    workspace: str | None
    priority: int | None
    billing_mode: str | None
    now: Timestamp
    replica: str | None = Field(
        default=None,
        description="Services and notebooks only: the replica explained (its first waiting one).",
    )
    replicas: WhyReplicas | None = Field(default=None, description="Services and notebooks only.")
    answer: Answer
    refusal: WhyRefusal | None = Field(default=None, description="answer refused only.")
    pending: PendingPart | None = Field(default=None, description="answer pending only.")
    projected_end: Timestamp | None = Field(
        default=None, description="answer running or admitted only."
    )
    runtime: Runtime | None = Field(default=None, description="answer running or admitted only.")
    admission: Admission | None
    stopped: Stopped | None = Field(
        default=None,
        description="Stopped by the dispatcher at its maximum run time (a service or "
        "notebook: by a budget or a released subscription).",
    )
    preemptions: list[WhyPreemption]
    summary: str
    freshness: Freshness | None = None


class WaitsRow(Strict):
    """Waits (queued to admitted) by admitted quota and priority; seconds as decimals."""

    quota: str
    priority: int
    waits: int = Field(description="Waits that ended (admitted) in the window.")
    requeued: int = Field(description="Of those, waits after a preemption.")
    waiting: int = Field(description="Jobs still queued.")
    withdrawn: int = Field(description="Jobs deleted while queued.")
    p50_s: DecimalText | None
    p95_s: DecimalText | None
    max_s: DecimalText | None
    mean_s: DecimalText | None


class WaitsPage(Strict):
    items: list[WaitsRow]
    next_cursor: str | None = None
    freshness: Freshness | None = None


class PreemptionRow(Strict):
    """One victim of a stored preemption decision, and the work it lost."""

    at: Timestamp
    preemptor: str | None
    preemptor_quota: str | None
    preemptor_priority: int | None
    victim: str
    victim_quota: str | None
    victim_priority: int | None
    victim_billing_mode: str | None
    reason: str | None
    victim_started_at: Timestamp | None
    gpu_hours_lost: DecimalText
    lost_cost_minor: int | None
    currency: str | None
    preemptor_uid: str | None
    victim_uid: str
    event_id: str
    scale: int | None = Field(default=None, description="With a cost only.")
    lost_cost_display: str | None = Field(default=None, description="With a cost only.")


class PreemptionPage(Strict):
    items: list[PreemptionRow]
    next_cursor: str | None = None
    freshness: Freshness | None = None


class GoodputRow(Strict):
    """One quota's or workspace's occupancies that ended in the window."""

    quota: str | None = Field(default=None, description="With by=quota.")
    workspace: str | None = Field(default=None, description="With by=workspace.")
    occupancies: int
    succeeded: int
    gpu_hours: DecimalText
    good_gpu_hours: DecimalText
    goodput: DecimalText | None = Field(description="GPU-weighted share that succeeded.")
    hours: DecimalText
    time_goodput: DecimalText | None = Field(description="Share of occupied time, unweighted.")


class GoodputPage(Strict):
    items: list[GoodputRow]
    next_cursor: str | None = None
    freshness: Freshness | None = None
