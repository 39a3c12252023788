"""Job state and audit timeline: "what is my job doing, and what happened to it, why, by whom".

One row per job uid in ``job_state`` (current status, when it entered each status,
who submitted it where, requested resources, restart and preemption counts, time
spent running and goodput), and its timeline: every event about the job, each with a
one-line summary, its source, ``by`` and ``reason``. The events of the job's own stream
``job/<uid>`` (nearly all of them) are read from the store when asked for (it is
append-only and indexed by stream, so a copy would only double the writes);
``job_timeline`` holds rows for the events about the job recorded on other streams
(decisions naming it, a pod reported on another job's stream).

Status model (DESIGN §3 lifecycle events, plus occupancy):

- JobSubmitted → Creating; JobQueued → Queuing; JobAdmitted → Admitted;
  JobStarted, or a pod bound (OccupancyStarted) while Creating/Queuing/Admitted/
  Restarting/Preempted → Running; JobRestarted → Restarting; JobPreempted → Preempted;
- JobSucceeded → Succeeded, JobFailed → Failed (from any non-final status);
- JobStopped or JobDeleted → Stopping while pods still occupy resources, Stopped
  once the last one is released (at that release's time); a deleted job that had
  already finished keeps its final status and only gets ``deleted_at``;
- Succeeded, Failed and Stopped are final: later lifecycle events still appear in
  the timeline but change nothing. A job recreated under the same name has a new
  uid, hence a new row and its own occupancies.

Times are cluster times (``occurred_at``, or the pod's own ``started_at`` /
``ended_at``), never the wall clock, so a rebuild reproduces every row.
``goodput`` = time in Running / (end - submission), for ended jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import orjson
from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    DateTime,
    Index,
    Integer,
    Numeric,
    SmallInteger,
    Table,
    Text,
    Uuid,
    and_,
    func,
    or_,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert

from ledger.canonical import format_timestamp
from ledger.events import JOB_LIFECYCLE_TYPES
from ledger.store.base import RecordedEvent, UnitOfWork
from ledger.store.schema import metadata
from projections.base import Projection
from projections.bulk import copy_table, fetch_keyed
from projections.finance_reports import job_cost
from projections.pages import MAX_PAGE, check_limit, decode_cursor, encode_cursor
from projections.steps import checkpoint_name

__all__ = [
    "FINAL_STATUSES",
    "MAX_PAGE",
    "STATUSES",
    "JobPage",
    "JobsProjection",
    "find_job",
    "fold_order",
    "job_detail",
    "job_state",
    "job_timeline",
    "job_workspace_quotas",
    "late_flags",
    "list_jobs",
    "timeline_rows",
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

_TS = DateTime(timezone=True)

job_state = Table(
    "job_state",
    metadata,
    Column("job_uid", Text, primary_key=True),
    Column("name", Text),
    Column("namespace", Text),
    Column("kind", Text),
    Column("framework", Text),
    Column("workspace", Text),
    Column("quota", Text),
    Column("user", Text),
    Column("priority", Integer),
    Column("billing_mode", Text),
    Column("replicas", JSONB, nullable=False),
    Column("status", Text, nullable=False),
    Column("status_since", _TS, nullable=False),
    Column("entered", JSONB, nullable=False),
    Column("submitted_at", _TS),
    Column("ended_at", _TS),
    Column("deleted_at", _TS),
    Column("restarts", Integer, nullable=False),
    Column("preemptions", Integer, nullable=False),
    Column("running_since", _TS),
    Column("running_us", BigInteger, nullable=False),
    Column("goodput", Numeric(12, 6)),
    Column("open_occupancies", ARRAY(Text), nullable=False),
    Column("events", Integer, nullable=False),
    Column("last_position", BigInteger, nullable=False),
    # the latest fact folded, in fold order: a fact that sorts before it re-folds the job
    Column("fold_at", _TS),
    Column("fold_rank", SmallInteger, nullable=False),
    Column("fold_position", BigInteger, nullable=False),
    # every status change as [status, at], in order: the status at any instant
    Column("transitions", JSONB, nullable=False),
    Index("job_state_workspace", "workspace", "status"),
    Index("job_state_user", "user"),
    Index("job_state_name", "name"),
    Index("job_state_status", "status"),
)

job_workspace_quotas = Table(
    "job_workspace_quotas",
    metadata,
    Column("workspace", Text, primary_key=True),
    Column("quota", Text),
)

job_timeline = Table(
    "job_timeline",
    metadata,
    Column("job_uid", Text, primary_key=True),
    Column("position", BigInteger, primary_key=True),
    Column("occurred_at", _TS, nullable=False),
    Column("type", Text, nullable=False),
    Column("summary", Text, nullable=False),
    Column("source", Text, nullable=False),
    Column("by", Text),
    Column("reason", Text),
    Column("stream", Text, nullable=False),
    Column("event_id", Uuid, nullable=False),
)

_LIFECYCLE = JOB_LIFECYCLE_TYPES
_OCCUPANCY = frozenset({"OccupancyStarted", "OccupancyEnded"})
_DECISIONS = frozenset({"AdmissionDecided", "PreemptionDecided"})
# on a job's own stream these name that job and, if another, data.job_uid: nothing else
_ABOUT_OWN_JOB = _LIFECYCLE | _OCCUPANCY
_MICRO = Decimal("0.000001")
_NEVER = datetime(1, 1, 1, tzinfo=UTC)  # sorts a job with no submission last


def _parse(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _micros(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


@dataclass(slots=True)
class _Job:
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
    def new(cls, uid: str, at: datetime) -> _Job:
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
            self.running_us += max(0, _micros(at - self.running_since))
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
        lifetime = _micros(self.ended_at - start)
        if lifetime <= 0:
            return None
        ratio = Decimal(min(self.running_us, lifetime)) / Decimal(lifetime)
        return ratio.quantize(_MICRO, rounding=ROUND_HALF_EVEN)

    def stop(self, at: datetime) -> None:
        self.enter("Stopping" if self.open_occupancies else "Stopped", at)


def _resources(mgpu: Any, cpu: Any, mem: Any) -> str:
    return f"{mgpu} mGPU, {cpu} mCPU, {mem} MiB"


def _replicas_summary(replicas: Sequence[dict[str, Any]]) -> str:
    parts = [
        f"{r.get('count', 1)} x {r.get('replica_type', 'worker')} "
        f"({_resources(r.get('mgpu', 0), r.get('cpu_milli', 0), r.get('memory_mib', 0))}"
        f" on {r.get('flavor', 'gpu/any')})"
        for r in replicas
    ]
    return ", ".join(parts) or "no replicas"


def _suffix(by: str | None, reason: str | None) -> str:
    out = f" by {by}" if by else ""
    return out + (f": {reason}" if reason else "")


_TRANSITION_TEXT = {
    "JobQueued": "queued",
    "JobAdmitted": "admitted",
    "JobStarted": "started running",
    "JobRestarted": "restarted",
    "JobPreempted": "preempted",
    "JobSucceeded": "succeeded",
    "JobFailed": "failed",
    "JobStopped": "stopped",
    "JobDeleted": "deleted",
}


def _summary(kind: str, data: dict[str, Any], job_uid: str, bound_quota: str | None = None) -> str:
    """One line about ``kind`` as seen from ``job_uid``; ``bound_quota``: the quota a
    JobSubmitted naming none was resolved to (its workspace's binding then)."""
    if kind == "JobSubmitted":
        quota = data.get("quota") or (
            f"{bound_quota} by workspace binding" if bound_quota else "none"
        )
        return (
            f"submitted {data.get('kind', 'Job')} {data.get('namespace', 'default')}/"
            f"{data.get('name')} by {data.get('user', 'unknown')} to workspace "
            f"{data.get('workspace')} (quota {quota}, {data.get('billing_mode', 'public')}, "
            f"priority {data.get('priority', 0)}): {_replicas_summary(data.get('replicas', ()))}"
        )
    if kind in _TRANSITION_TEXT:
        return _TRANSITION_TEXT[kind] + _suffix(data.get("by"), data.get("reason"))
    if kind == "OccupancyStarted":
        pod = data.get("pod_name") or data.get("pod_uid")
        return (
            f"pod {pod} bound to node {data.get('node') or '?'} at {data.get('started_at')}: "
            f"{_resources(data.get('mgpu'), data.get('cpu_milli'), data.get('memory_mib'))} "
            f"({data.get('flavor')}, {data.get('billing_mode')})"
        )
    if kind == "OccupancyEnded":
        estimated = ", estimated" if data.get("estimated") else ""
        pod = data.get("pod_name") or data.get("pod_uid")
        return (
            f"pod {pod} released at {data.get('ended_at')} "
            f"({data.get('reason', 'completed')}{estimated})"
        )
    if kind == "AdmissionDecided":
        borrowing = ", borrowing" if data.get("borrowing") else ""
        return f"admission decision: {data.get('outcome')} in quota {data.get('quota')}{borrowing}"
    if kind == "PreemptionDecided":
        victims = [v.get("job_uid") for v in data.get("victims", ())]
        if data.get("preemptor") == job_uid:
            return f"preempts {len(victims)} job(s) ({', '.join(map(str, victims))}): " + str(
                data.get("reason")
            )
        return f"chosen as preemption victim for job {data.get('preemptor')}"
    return kind


def _named_jobs(event: RecordedEvent) -> list[tuple[str, str | None, str | None]]:
    """(job uid, by, reason) for every job the event is about."""
    data = event.data
    found: dict[str, tuple[str | None, str | None]] = {}
    if event.stream.startswith("job/"):
        found[event.stream[4:]] = (data.get("by"), data.get("reason"))
    uid = data.get("job_uid")
    if isinstance(uid, str) and uid not in found:
        found[uid] = (data.get("by"), data.get("reason"))
    if event.type == "OccupancyEnded":
        for key in list(found):
            found[key] = (None, data.get("reason"))
    elif event.type == "AdmissionDecided":
        for key in list(found):
            found[key] = ("dispatcher", data.get("outcome"))
    elif event.type == "PreemptionDecided":
        preemptor = data.get("preemptor")
        if isinstance(preemptor, str):
            found.setdefault(preemptor, (None, data.get("reason")))
        for victim in data.get("victims", ()):
            vid = victim.get("job_uid")
            if isinstance(vid, str):
                found[vid] = (preemptor, victim.get("reason") or data.get("reason"))
    return [(uid, by, reason) for uid, (by, reason) in found.items()]


# columns in _Job's field order, so a row constructs it positionally
_TAKE_SQL = "DELETE FROM job_state WHERE job_uid = ANY(%s) RETURNING {}".format(
    ", ".join("replicas::text" if f.name == "replicas" else f'"{f.name}"' for f in fields(_Job))
)


def _take(conn: Connection, uids: set[str]) -> dict[str, _Job]:
    """Take the stored rows of ``uids`` out of job_state and return their state.

    Every job a page names is folded and written back by the same transaction, so
    deleting while loading finds each row once, where a SELECT and then a DELETE of
    the same keys probed the primary key twice (replicas stay JSON text).
    """
    return {row[0]: _Job(*row) for row in fetch_keyed(conn, _TAKE_SQL, (list(uids),))}


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
_LAST_RANK = 8


def fold_order(occurred_at: datetime, kind: str, position: int) -> tuple[datetime, int, int]:
    """The order a job's facts take effect in: cluster time, lifecycle rank, position."""
    return (occurred_at, _RANK.get(kind, _LAST_RANK), position)


@dataclass(slots=True)
class _Fact:
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


def _target(event: RecordedEvent) -> str | None:
    """The job whose state ``event`` changes, if it is a lifecycle or occupancy fact."""
    kind = event.type
    if kind not in _ABOUT_OWN_JOB:
        return None
    uid = event.data.get("job_uid")
    if isinstance(uid, str) and uid:
        return uid
    return event.stream[4:] if event.stream.startswith("job/") else None


class JobsProjection(Projection):
    """Folds job lifecycle, occupancy and decision events into job_state and job_timeline.

    A job's state is a function of its facts in :func:`fold_order`, whatever order they
    were stored in (Kafka orders per key only, a watcher re-lists): facts of a page fold
    in that order, and a fact that sorts before one already folded re-folds the job
    from all its stored facts.
    """

    name = "jobs"
    cost = 2.2
    tables = (job_state, job_timeline, job_workspace_quotas)

    def apply(self, uow: UnitOfWork, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        # one pass: timeline rows (they depend on the event alone) and each job's facts
        timeline: list[tuple[Any, ...]] = []
        facts: dict[str, list[_Fact]] = {}
        bindings: dict[str, str | None] | None = None
        bound: dict[str, str | None] = {}
        for event in events:
            kind = event.type
            stream = event.stream
            data = event.data
            if kind == "WorkspaceBound":
                if bindings is None:
                    bindings = _bindings(conn)
                bindings[data["workspace"]] = bound[data["workspace"]] = data.get("quota")
                continue
            own = stream[4:] if stream.startswith("job/") else None
            if own is not None and kind in _ABOUT_OWN_JOB:
                # nearly every event: a transition or pod of its own stream's job, whose
                # timeline reads it from the store; only another job it names needs a row
                uid = data.get("job_uid")
                if isinstance(uid, str) and uid != own:
                    timeline.extend(_rows_elsewhere(event, _named_jobs(event)))
            elif kind in _OCCUPANCY or kind in _DECISIONS or own is not None:
                named = _named_jobs(event)
                if named:
                    timeline.extend(_rows_elsewhere(event, named))
            target = _target(event)
            if not target:
                continue
            fact = _Fact(kind, data, event.occurred_at, event.position)
            if kind == "JobSubmitted" and not data.get("quota"):
                if bindings is None:
                    bindings = _bindings(conn)
                fact.bound_quota = bindings.get(data.get("workspace") or "")
            facts.setdefault(target, []).append(fact)
        if facts:
            jobs = _take(conn, set(facts))
            late = {
                uid
                for uid, new in facts.items()
                if uid in jobs and min(f.order for f in new) < _folded_to(jobs[uid])
            }
            if late:
                stored = _stored_facts(uow, conn, late, jobs, events[0].position)
                for uid, old in stored.items():
                    facts[uid] = old + facts[uid]
            for uid, new in facts.items():
                job = None if uid in late else jobs.get(uid)
                jobs[uid] = _fold_facts(uid, job, new)
            # every job taken out or created above goes back, folded
            copy_table(conn, job_state, [jobs[uid].row() for uid in sorted(jobs)])
        copy_table(conn, job_timeline, timeline)
        for workspace, quota in sorted(bound.items()):
            conn.execute(
                pg_insert(job_workspace_quotas)
                .values(workspace=workspace, quota=quota)
                .on_conflict_do_update(index_elements=["workspace"], set_={"quota": quota})
            )


def _bindings(conn: Connection) -> dict[str, str | None]:
    return {ws: quota for ws, quota in conn.execute(select(job_workspace_quotas))}


def _folded_to(job: _Job) -> tuple[datetime, int, int]:
    assert job.fold_at is not None
    return (job.fold_at, job.fold_rank, job.fold_position)


def _stored_facts(
    uow: UnitOfWork, conn: Connection, uids: set[str], jobs: dict[str, _Job], before: int
) -> dict[str, list[_Fact]]:
    """The facts of ``uids`` stored before position ``before``: their own streams, and
    the facts about them on other streams (their ``job_timeline`` rows point at them).

    A JobSubmitted naming no quota takes the quota it was resolved to when first
    folded (the binding then), kept in the job's row.
    """
    streams = [f"job/{uid}" for uid in sorted(uids)]
    stored = uow.read_streams(streams, before=before)
    elsewhere = conn.execute(
        select(job_timeline.c.position)
        .where(
            job_timeline.c.job_uid.in_(sorted(uids)),
            job_timeline.c.position < before,
            job_timeline.c.type.in_(sorted(_ABOUT_OWN_JOB)),
        )
        .distinct()
    ).scalars()
    stored += uow.read_positions(sorted(elsewhere))
    out: dict[str, list[_Fact]] = {uid: [] for uid in uids}
    for event in stored:
        uid = _target(event)
        if uid not in out:
            continue
        fact = _Fact(event.type, event.data, event.occurred_at, event.position)
        if event.type == "JobSubmitted" and not event.data.get("quota"):
            fact.bound_quota = jobs[uid].quota
        out[uid].append(fact)
    return out


def _fold_facts(uid: str, job: _Job | None, facts: list[_Fact]) -> _Job:
    """``job`` (None: a new job) with ``facts`` folded in fold order."""
    facts.sort(key=lambda f: f.order)
    if job is None:
        job = _Job.new(uid, facts[0].occurred_at)
    for fact in facts:
        _fold(job, fact.kind, fact.data, fact.occurred_at)
        if fact.kind == "JobSubmitted" and job.quota is None:
            job.quota = fact.bound_quota
        job.events += 1
        job.last_position = max(job.last_position, fact.position)
    job.fold_at, job.fold_rank, job.fold_position = facts[-1].order
    return job


def _rows_elsewhere(
    event: RecordedEvent, named: list[tuple[str, str | None, str | None]]
) -> list[tuple[Any, ...]]:
    """``job_timeline`` rows of ``event`` for the ``named`` jobs whose own stream it is not
    on (their timelines cannot find it in the store by stream)."""
    stream = event.stream
    return [
        _timeline_row(event, uid, by, reason) for uid, by, reason in named if stream != f"job/{uid}"
    ]


def _timeline_row(
    event: RecordedEvent, uid: str, by: Any, reason: Any, bound_quota: str | None = None
) -> tuple[Any, ...]:
    """A ``job_timeline`` row (table order): the event as seen from job ``uid``."""
    return (
        uid,
        event.position,
        event.occurred_at,
        event.type,
        _summary(event.type, event.data, uid, bound_quota),
        event.source,
        by,
        reason,
        event.stream,
        event.event_id,
    )


def _fold(job: _Job, kind: str, data: dict[str, Any], at: datetime) -> None:
    final = job.status in FINAL_STATUSES
    if kind == "OccupancyStarted":
        occupancy = data["occupancy_id"]
        if occupancy not in job.open_occupancies:
            job.open_occupancies = sorted([*job.open_occupancies, occupancy])
        if job.status in _STARTABLE:
            job.enter("Running", _parse(data["started_at"]))
    elif kind == "OccupancyEnded":
        occupancy = data["occupancy_id"]
        if occupancy in job.open_occupancies:
            job.open_occupancies = [o for o in job.open_occupancies if o != occupancy]
            if job.status == "Stopping" and not job.open_occupancies:
                job.enter("Stopped", _parse(data["ended_at"]))
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
    elif final:
        if kind == "JobDeleted" and job.deleted_at is None:
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
    elif kind == "JobDeleted":
        if job.deleted_at is None:
            job.deleted_at = at
        job.stop(at)


# --- queries ------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _job_dict(row: Any) -> dict[str, Any]:
    m = dict(row._mapping)
    hidden = (
        "running_since",
        "open_occupancies",
        "last_position",
        "events",
        "running_us",
        "fold_at",
        "fold_rank",
        "fold_position",
        "transitions",
    )
    out = {k: _jsonable(v) for k, v in m.items() if k not in hidden}
    out["running_seconds"] = _jsonable(Decimal(m["running_us"]) / 1_000_000)
    out["open_occupancies"] = len(m["open_occupancies"])
    return out


@dataclass(frozen=True)
class JobPage:
    """One page of :func:`list_jobs`; ``next_cursor`` continues it (None: the last page)."""

    jobs: list[dict[str, Any]]
    next_cursor: str | None


def _encode_cursor(submitted_at: datetime | None, uid: str) -> str:
    return encode_cursor([format_timestamp(submitted_at) if submitted_at else None, uid])


def _decode_cursor(cursor: str) -> tuple[datetime | None, str]:
    submitted, uid = decode_cursor(cursor, (str, type(None)), str)
    try:
        return (_parse(submitted) if submitted else None), uid
    except ValueError as exc:
        raise ValueError(
            f"invalid cursor {cursor[:40]!r}: pass the one a previous page printed"
        ) from exc


def _status_at(transitions: Sequence[Sequence[str]], at: datetime) -> tuple[str, str] | None:
    """The (status, since) in force at ``at``; None before the job existed."""
    current = None
    for status, since in transitions:
        if _parse(since) > at:
            break
        current = (status, since)
    return current


def _running_us_at(transitions: Sequence[Sequence[str]], at: datetime) -> int:
    """Microseconds spent Running up to ``at``."""
    total = 0
    running_since: datetime | None = None
    for status, since in transitions:
        moment = min(_parse(since), at)
        if running_since is not None:
            total += _micros(moment - running_since)
            running_since = None
        if status == "Running" and moment < at:
            running_since = moment
    if running_since is not None:
        total += _micros(at - running_since)
    return total


def _as_at(job: dict[str, Any], transitions: Sequence[Sequence[str]], at: datetime) -> None:
    """Rewrite the time-dependent fields of a listed job as they stood at ``at``."""
    status, since = _status_at(transitions, at) or ("Creating", job["submitted_at"])
    job["status"], job["status_since"] = status, since
    job["entered"] = {s: t for s, t in job["entered"].items() if _parse(t) <= at}
    for key in ("ended_at", "deleted_at"):
        if job[key] is not None and _parse(job[key]) > at:
            job[key] = None
    if job["ended_at"] is None:
        job["goodput"] = None
    job["running_seconds"] = _jsonable(Decimal(_running_us_at(transitions, at)) / 1_000_000)
    job["at"] = format_timestamp(at)


def list_jobs(
    conn: Connection,
    *,
    workspace: str | None = None,
    status: str | None = None,
    user: str | None = None,
    limit: int = 50,
    at: datetime | None = None,
    cursor: str | None = None,
) -> JobPage:
    """Jobs, newest submission first, filtered, one page; JSON-ready dicts.

    ``at`` (cluster time): only jobs that existed then, with their status, running time
    and end as of that instant (``status`` filters on it). Pages are keyed on
    (submission, uid), so a page never repeats or skips a job while new ones arrive.
    """
    if status is not None and status not in STATUSES:
        raise ValueError(f"unknown status {status!r}; one of {', '.join(STATUSES)}")
    check_limit(limit)
    submitted = func.coalesce(job_state.c.submitted_at, _NEVER)
    query = job_state.select()
    if workspace is not None:
        query = query.where(job_state.c.workspace == workspace)
    if user is not None:
        query = query.where(job_state.c.user == user)
    if status is not None and at is None:
        query = query.where(job_state.c.status == status)
    if at is not None:
        # the first transition is the job's first fact: later ones did not exist yet
        query = query.where(
            text("(job_state.transitions -> 0 ->> 1)::timestamptz <= :at").bindparams(at=at)
        )
    if cursor is not None:
        after_submitted, after_uid = _decode_cursor(cursor)
        key = after_submitted or _NEVER
        query = query.where(
            or_(submitted < key, and_(submitted == key, job_state.c.job_uid > after_uid))
        )
    query = query.order_by(submitted.desc(), job_state.c.job_uid)
    jobs: list[dict[str, Any]] = []
    last: Any = None
    # with ``at`` and ``status`` the status filter is applied after the rewrite: read on
    for row in conn.execution_options(yield_per=limit).execute(query):
        job = _job_dict(row)
        if at is not None:
            _as_at(job, row.transitions, at)
            if status is not None and job["status"] != status:
                continue
        if len(jobs) == limit:
            return JobPage(jobs, _encode_cursor(last.submitted_at, last.job_uid))
        jobs.append(job)
        last = row
    return JobPage(jobs, None)


def find_job(conn: Connection, ref: str) -> str:
    """The uid of job ``ref`` (a uid, or a name that only one job carries)."""
    if conn.execute(job_state.select().where(job_state.c.job_uid == ref)).first():
        return ref
    uids = [
        row.job_uid
        for row in conn.execute(
            job_state.select().where(job_state.c.name == ref).order_by(job_state.c.submitted_at)
        )
    ]
    if not uids:
        raise ValueError(f"no job with uid or name {ref!r}")
    if len(uids) > 1:
        raise ValueError(f"name {ref!r} is ambiguous, {len(uids)} jobs: {', '.join(uids)}")
    return str(uids[0])


def job_detail(uow: UnitOfWork, uid: str) -> dict[str, Any]:
    """One job: state, occupied resource-seconds per flavor (closed occupancies), timeline,
    read in ``uow`` (a :meth:`~ledger.store.base.EventStore.snapshot`: one view of all)."""
    conn: Connection = uow.connection
    row = conn.execute(job_state.select().where(job_state.c.job_uid == uid)).first()
    if row is None:
        raise ValueError(f"no job with uid {uid!r}")
    detail = _job_dict(row)
    usage = conn.execute(
        text(
            """
            SELECT flavor,
                   sum(mgpu * extract(epoch FROM ended_at - started_at)) AS mgpu_seconds,
                   sum(cpu_milli * extract(epoch FROM ended_at - started_at)) AS cpu_milli_seconds,
                   sum(memory_mib * extract(epoch FROM ended_at - started_at))
                     AS memory_mib_seconds,
                   count(*) AS occupancies
            FROM occupancy
            WHERE job_uid = :uid AND started_at IS NOT NULL AND ended_at IS NOT NULL
            GROUP BY flavor ORDER BY flavor
            """
        ),
        {"uid": uid},
    )
    detail["occupied"] = [{k: _jsonable(v) for k, v in u._mapping.items()} for u in usage]
    rows = timeline_rows(uow, uid)
    detail["timeline"] = [
        {k: _jsonable(v) for k, v in zip(_TIMELINE_COLUMNS, row, strict=True) if k != "job_uid"}
        | {"event_id": str(row[-1]), "late": late}
        for row, late in zip(rows, late_flags(rows), strict=True)
    ]
    # cost per flavor x billing mode, posted and rated (billing read model; precise
    # amounts as decimal strings, never floats)
    detail["cost"] = [
        {k: str(v) if isinstance(v, Decimal) else v for k, v in r.items()}
        for r in job_cost(conn, uid)
    ]
    return detail


_TIMELINE_COLUMNS = tuple(c.name for c in job_timeline.columns)


def timeline_rows(uow: UnitOfWork, uid: str) -> list[tuple[Any, ...]]:
    """Job ``uid``'s timeline as of the projection's checkpoint: ``job_timeline`` rows in
    table order, in :func:`fold_order` (cluster time).

    The events of the job's own stream come from the store itself (append-only, indexed
    by stream), read up to the checkpoint so they match ``job_state``; the table holds
    only the events about the job recorded elsewhere (decisions, another job's stream).
    """
    conn: Connection = uow.connection
    upto = uow.load_checkpoint(checkpoint_name(JobsProjection())).position
    stored = conn.execute(
        job_timeline.select().where(job_timeline.c.job_uid == uid, job_timeline.c.position <= upto)
    )
    rows: list[tuple[Any, ...]] = [tuple(r) for r in stored]  # in order once merged below
    quota = conn.execute(select(job_state.c.quota).where(job_state.c.job_uid == uid)).scalar()
    for event in uow.read_stream(f"job/{uid}", upto=upto):
        by, reason = next((b, r) for u, b, r in _named_jobs(event) if u == uid)
        rows.append(_timeline_row(event, uid, by, reason, quota))
    rows.sort(key=lambda r: fold_order(r[2], r[3], int(r[1])))
    return rows


def late_flags(rows: Sequence[tuple[Any, ...]]) -> list[bool]:
    """For timeline ``rows`` in cluster-time order: was each fact stored after a fact
    that happened strictly later (it arrived late)? Facts of one instant are not late
    for each other, whatever order they were stored in."""
    flags = [False] * len(rows)
    lowest_after: int | None = None  # lowest position among facts of later instants
    end = len(rows)
    while end > 0:
        start = end - 1
        while start > 0 and rows[start - 1][2] == rows[end - 1][2]:
            start -= 1
        positions = [int(rows[i][1]) for i in range(start, end)]
        for i, position in zip(range(start, end), positions, strict=True):
            flags[i] = lowest_after is not None and position > lowest_after
        lowest = min(positions)
        lowest_after = lowest if lowest_after is None else min(lowest_after, lowest)
        end = start
    return flags
