"""The job state machine: a job's facts folded, in fold order, into its state. No IO.

Status model (DESIGN §3 lifecycle events, plus occupancy):

- JobSubmitted (a service's or notebook's WorkloadCreated: docs/workloads.md) → Creating;
  JobQueued → Queuing; JobAdmitted → Admitted;
  JobStarted, or a pod bound (OccupancyStarted) while Creating/Queuing/Admitted/
  Restarting/Preempted → Running; JobRestarted → Restarting; JobPreempted → Preempted;
- JobSucceeded → Succeeded, JobFailed → Failed (from any non-final status);
- JobStopped, JobDeleted or WorkloadDeleted → Stopping while pods still occupy resources,
  Stopped
  once the last one is released (at that release's time); a deleted job that had
  already finished keeps its final status and only gets ``deleted_at``;
- Succeeded, Failed and Stopped are final: later lifecycle events still appear in
  the timeline but change nothing. A job recreated under the same name has a new
  uid, hence a new row and its own occupancies.

Times are cluster times (``occurred_at``, or the pod's own ``started_at`` /
``ended_at``), never the wall clock, so a rebuild reproduces every row.
``goodput`` = time in Running / (end - submission), for ended jobs.

Facts fold in :func:`fold_order` (cluster time, then lifecycle rank, then position), so
a job's state does not depend on the order its facts were stored in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import orjson

from ledger.canonical import format_timestamp
from ledger.events import JOB_LIFECYCLE_TYPES, WORKLOAD_TYPES
from ledger.store.base import RecordedEvent

__all__ = [
    "ABOUT_OWN_JOB",
    "FINAL_STATUSES",
    "OCCUPANCY",
    "STATUSES",
    "SUBMISSIONS",
    "Fact",
    "FoldedJob",
    "fact_target",
    "fold_facts",
    "fold_order",
    "folded_to",
    "micros",
    "parse_time",
]

STATUSES = (
    "Creating",
    "Queuing",
    "Admitted",
    "Running",
    "Restarting",
    "Preempted",
    "Stopping",
    "Succeeded",
    "Failed",
    "Stopped",
)
FINAL_STATUSES = frozenset({"Succeeded", "Failed", "Stopped"})
_STARTABLE = frozenset({"Creating", "Queuing", "Admitted", "Restarting", "Preempted"})

# a service or notebook folds as a job whose kind is its object's (Deployment ...) and whose
# framework is its workload kind (service, notebook); its scales and updates are timeline rows
_LIFECYCLE = JOB_LIFECYCLE_TYPES | WORKLOAD_TYPES
#: what opens a job's row: a training job's submission, a workload's creation
SUBMISSIONS = frozenset({"JobSubmitted", "WorkloadCreated"})
OCCUPANCY = frozenset({"OccupancyStarted", "OccupancyEnded"})
# on a job's own stream these name that job and, if another, data.job_uid: nothing else
ABOUT_OWN_JOB = _LIFECYCLE | OCCUPANCY
_MICRO = Decimal("0.000001")


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value)


def micros(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


@dataclass(slots=True)
class FoldedJob:
    job_uid: str
    status: str
    status_since: datetime
    name: str | None = None
    namespace: str | None = None
    kind: str | None = None
    framework: str | None = None
    workspace: str | None = None
    quota: str | None = None
    user: str | None = None
    priority: int | None = None
    billing_mode: str | None = None
    replicas: str = "[]"  # JSON text: set once from JobSubmitted, written back untouched
    entered: dict[str, str] = field(default_factory=dict)
    submitted_at: datetime | None = None
    ended_at: datetime | None = None
    deleted_at: datetime | None = None
    restarts: int = 0
    preemptions: int = 0
    running_since: datetime | None = None
    running_us: int = 0
    goodput: Decimal | None = None
    open_occupancies: list[str] = field(default_factory=list)
    events: int = 0
    last_position: int = 0
    fold_at: datetime | None = None
    fold_rank: int = -1
    fold_position: int = 0
    transitions: list[list[str]] = field(default_factory=list)

    @classmethod
    def new(cls, uid: str, at: datetime) -> FoldedJob:
        job = cls(uid, "Creating", at)
        job.entered["Creating"] = format_timestamp(at)
        job.transitions.append(["Creating", job.entered["Creating"]])
        return job

    def row(self) -> tuple[Any, ...]:
        """The job_state row, columns in table order (JSONB as text for COPY)."""
        return (
            self.job_uid,
            self.name,
            self.namespace,
            self.kind,
            self.framework,
            self.workspace,
            self.quota,
            self.user,
            self.priority,
            self.billing_mode,
            self.replicas,
            self.status,
            self.status_since,
            orjson.dumps(self.entered, option=orjson.OPT_SORT_KEYS).decode(),
            self.submitted_at,
            self.ended_at,
            self.deleted_at,
            self.restarts,
            self.preemptions,
            self.running_since,
            self.running_us,
            self.goodput,
            self.open_occupancies,
            self.events,
            self.last_position,
            self.fold_at,
            self.fold_rank,
            self.fold_position,
            orjson.dumps(self.transitions).decode(),
        )

    def enter(self, status: str, at: datetime) -> None:
        if status == self.status:
            return
        if self.running_since is not None:
            self.running_us += max(0, micros(at - self.running_since))
            self.running_since = None
        self.status = status
        self.status_since = at
        stamp = format_timestamp(at)
        self.entered.setdefault(status, stamp)
        self.transitions.append([status, stamp])
        if status == "Running":
            self.running_since = at
        elif status in FINAL_STATUSES:
            self.ended_at = at
            self.goodput = self._goodput()

    def _goodput(self) -> Decimal | None:
        start = self.submitted_at
        if start is None or self.ended_at is None:
            return None
        lifetime = micros(self.ended_at - start)
        if lifetime <= 0:
            return None
        ratio = Decimal(min(self.running_us, lifetime)) / Decimal(lifetime)
        return ratio.quantize(_MICRO, rounding=ROUND_HALF_EVEN)

    def stop(self, at: datetime) -> None:
        self.enter("Stopping" if self.open_occupancies else "Stopped", at)


# Facts at the same cluster instant fold in lifecycle order, so the state does not
# depend on which of them was stored first (a pod bound and failed in the same second
# still ran); store position breaks the remaining ties.
_RANK = {
    "JobSubmitted": 0,
    "JobQueued": 1,
    "JobAdmitted": 2,
    "AdmissionDecided": 2,
    "JobStarted": 3,
    "OccupancyStarted": 3,
    "OccupancyEnded": 4,
    "PreemptionDecided": 5,
    "JobRestarted": 5,
    "JobPreempted": 5,
    "JobSucceeded": 6,
    "JobFailed": 6,
    "JobStopped": 7,
    "JobDeleted": 7,
}
# a service's or notebook's facts, around its replicas' occupancies: created first, a scale
# or an update after the pods of that instant, deleted last (after the pods it released)
_WORKLOAD_RANK = {
    "WorkloadCreated": 0,
    "WorkloadScaled": 5,
    "WorkloadUpdated": 5,
    "WorkloadDeleted": 7,
}
_LAST_RANK = 8


def fold_order(occurred_at: datetime, kind: str, position: int) -> tuple[datetime, int, int]:
    """The order a job's facts take effect in: cluster time, lifecycle rank, position."""
    rank = _RANK.get(kind)
    if rank is None:
        rank = _WORKLOAD_RANK.get(kind, _LAST_RANK)
    return (occurred_at, rank, position)


@dataclass(slots=True)
class Fact:
    """One fact the job state machine folds (a lifecycle or occupancy event)."""

    kind: str
    data: dict[str, Any]
    occurred_at: datetime
    position: int
    # a JobSubmitted naming no quota: the workspace's binding when it was stored
    bound_quota: str | None = None

    @property
    def order(self) -> tuple[datetime, int, int]:
        return fold_order(self.occurred_at, self.kind, self.position)


def fact_target(event: RecordedEvent) -> str | None:
    """The job whose state ``event`` changes, if it is a lifecycle or occupancy fact."""
    kind = event.type
    if kind not in ABOUT_OWN_JOB:
        return None
    uid = event.data.get("job_uid")
    if isinstance(uid, str) and uid:
        return uid
    return event.stream[4:] if event.stream.startswith("job/") else None


def folded_to(job: FoldedJob) -> tuple[datetime, int, int]:
    assert job.fold_at is not None
    return (job.fold_at, job.fold_rank, job.fold_position)


def fold_facts(uid: str, job: FoldedJob | None, facts: list[Fact]) -> FoldedJob:
    """``job`` (None: a new job) with ``facts`` folded in fold order."""
    facts.sort(key=lambda f: f.order)
    if job is None:
        job = FoldedJob.new(uid, facts[0].occurred_at)
    for fact in facts:
        fold_fact(job, fact.kind, fact.data, fact.occurred_at)
        if fact.kind in SUBMISSIONS and job.quota is None:
            job.quota = fact.bound_quota
        job.events += 1
        job.last_position = max(job.last_position, fact.position)
    job.fold_at, job.fold_rank, job.fold_position = facts[-1].order
    return job


def _reshape(job: FoldedJob, kind: str, data: dict[str, Any]) -> None:
    """A workload's requested replicas as they stand: its desired count after a scale (its
    ``replicas``: one spec, ``count`` pods = replicas x pods per replica), its replica's
    resources after a rolling update."""
    specs = orjson.loads(job.replicas)
    if not specs:
        return
    spec = specs[0]
    per_replica = int(spec.get("per_replica", spec.get("count", 1)))
    if kind == "WorkloadUpdated":
        spec = dict(data.get("replica") or spec)
        per_replica = int(spec.get("count", 1))
        desired = int(specs[0].get("replicas", 1))
    else:
        desired = int(data.get("to_replicas", 0))
    spec.update(count=per_replica * desired, per_replica=per_replica, replicas=desired)
    job.replicas = orjson.dumps([spec], option=orjson.OPT_SORT_KEYS).decode()


def fold_fact(job: FoldedJob, kind: str, data: dict[str, Any], at: datetime) -> None:
    final = job.status in FINAL_STATUSES
    if kind == "OccupancyStarted":
        occupancy = data["occupancy_id"]
        if occupancy not in job.open_occupancies:
            job.open_occupancies = sorted([*job.open_occupancies, occupancy])
        if job.status in _STARTABLE:
            job.enter("Running", parse_time(data["started_at"]))
    elif kind == "OccupancyEnded":
        occupancy = data["occupancy_id"]
        if occupancy in job.open_occupancies:
            job.open_occupancies = [o for o in job.open_occupancies if o != occupancy]
            if job.status == "Stopping" and not job.open_occupancies:
                job.enter("Stopped", parse_time(data["ended_at"]))
    elif kind == "JobSubmitted":
        job.name = data.get("name")
        job.namespace = data.get("namespace", "default")
        job.kind = data.get("kind", "Job")
        job.framework = data.get("framework", "none")
        job.workspace = data.get("workspace")
        job.quota = data.get("quota")
        job.user = data.get("user", "unknown")
        job.priority = data.get("priority", 0)
        job.billing_mode = data.get("billing_mode", "public")
        job.replicas = orjson.dumps(
            list(data.get("replicas", ())), option=orjson.OPT_SORT_KEYS
        ).decode()
        if job.submitted_at is None:
            job.submitted_at = at
    elif kind == "WorkloadCreated":
        job.name = data.get("name")
        job.namespace = data.get("namespace", "default")
        job.kind = data.get("kind", "Deployment")
        job.framework = data.get("workload", "service")
        job.workspace = data.get("workspace")
        job.quota = data.get("quota")
        job.user = data.get("user", "unknown")
        job.priority = data.get("priority", 0)
        job.billing_mode = data.get("billing_mode", "public")
        replica = dict(data.get("replica") or {})
        desired = int(data.get("replicas", 1))
        per_replica = int(replica.get("count", 1))
        # the workload's pods: desired replicas x pods per replica (a LeaderWorkerSet's group)
        replica.update(count=per_replica * desired, per_replica=per_replica, replicas=desired)
        job.replicas = orjson.dumps([replica], option=orjson.OPT_SORT_KEYS).decode()
        if job.submitted_at is None:
            job.submitted_at = at
    elif kind in ("WorkloadScaled", "WorkloadUpdated"):
        _reshape(job, kind, data)
    elif final:
        if kind in ("JobDeleted", "WorkloadDeleted") and job.deleted_at is None:
            job.deleted_at = at
    elif kind == "JobQueued":
        job.enter("Queuing", at)
    elif kind == "JobAdmitted":
        job.enter("Admitted", at)
    elif kind == "JobStarted":
        if job.status != "Stopping":
            job.enter("Running", at)
    elif kind == "JobRestarted":
        job.restarts += 1
        job.enter("Restarting", at)
    elif kind == "JobPreempted":
        job.preemptions += 1
        job.enter("Preempted", at)
    elif kind == "JobSucceeded":
        job.enter("Succeeded", at)
    elif kind == "JobFailed":
        job.enter("Failed", at)
    elif kind == "JobStopped":
        job.stop(at)
    elif kind in ("JobDeleted", "WorkloadDeleted"):
        if job.deleted_at is None:
            job.deleted_at = at
        job.stop(at)
