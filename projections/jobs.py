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
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import orjson
from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    DateTime,
    Integer,
    Numeric,
    Table,
    Text,
    Uuid,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert

from ledger.canonical import format_timestamp
from ledger.events import JOB_LIFECYCLE_TYPES
from ledger.store.base import RecordedEvent
from ledger.store.postgres import PostgresEventStore, PostgresUnitOfWork
from ledger.store.schema import metadata
from projections.base import Projection
from projections.bulk import copy_table, fetch_keyed
from projections.steps import checkpoint_name

__all__ = [
    "FINAL_STATUSES",
    "STATUSES",
    "JobsProjection",
    "find_job",
    "job_detail",
    "job_state",
    "job_timeline",
    "job_workspace_quotas",
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

    @classmethod
    def new(cls, uid: str, at: datetime) -> _Job:
        job = cls(uid, "Creating", at)
        job.entered["Creating"] = format_timestamp(at)
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
        )

    def enter(self, status: str, at: datetime) -> None:
        if status == self.status:
            return
        if self.running_since is not None:
            self.running_us += max(0, _micros(at - self.running_since))
            self.running_since = None
        self.status = status
        self.status_since = at
        self.entered.setdefault(status, format_timestamp(at))
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


def _summary(kind: str, data: dict[str, Any], job_uid: str) -> str:
    if kind == "JobSubmitted":
        quota = data.get("quota") or "none"
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


class JobsProjection(Projection):
    """Folds job lifecycle, occupancy and decision events into job_state and job_timeline."""

    name = "jobs"
    cost = 2.2
    tables = (job_state, job_timeline, job_workspace_quotas)

    def apply(self, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        # one pass: timeline rows (they depend on the event alone) and the fold's work list
        timeline: list[tuple[Any, ...]] = []
        folds: list[tuple[str, str, dict[str, Any], datetime, int]] = []
        uids: set[str] = set()
        for event in events:
            kind = event.type
            stream = event.stream
            data = event.data
            if stream.startswith("job/") and kind in _ABOUT_OWN_JOB:
                # nearly every event: a transition or pod of its own stream's job, whose
                # timeline reads it from the store; only another job it names needs a row
                own = stream[4:]
                uid = data.get("job_uid")
                if isinstance(uid, str) and uid != own:
                    timeline.extend(_rows_elsewhere(event, _named_jobs(event)))
                target = uid or own
            elif kind in _OCCUPANCY or kind in _DECISIONS or stream.startswith("job/"):
                named = _named_jobs(event)
                if not named:
                    continue
                timeline.extend(_rows_elsewhere(event, named))
                if kind not in _OCCUPANCY and kind not in _LIFECYCLE:
                    continue
                target = data.get("job_uid") or stream[4:]
            elif kind == "WorkspaceBound":
                target = ""  # not a job: a binding, folded in order with the jobs below
            else:
                continue
            folds.append((target, kind, data, event.occurred_at, event.position))
            if target:
                uids.add(target)
        if not folds and not timeline:
            return
        jobs = _take(conn, uids) if uids else {}
        bindings: dict[str, str | None] | None = None
        bound: dict[str, str | None] = {}
        for uid, kind, data, occurred_at, position in folds:
            if kind == "WorkspaceBound" or (kind == "JobSubmitted" and not data.get("quota")):
                if bindings is None:
                    bindings = {
                        ws: quota for ws, quota in conn.execute(select(job_workspace_quotas))
                    }
                if kind == "WorkspaceBound":
                    bindings[data["workspace"]] = bound[data["workspace"]] = data.get("quota")
                    continue
            job = jobs.get(uid)
            if job is None:
                job = jobs[uid] = _Job.new(uid, occurred_at)
            _fold(job, kind, data, occurred_at)
            if kind == "JobSubmitted" and job.quota is None and bindings is not None:
                job.quota = bindings.get(job.workspace or "")
            job.events += 1
            job.last_position = position
        # every job taken out or created above goes back, folded
        copy_table(conn, job_state, [jobs[uid].row() for uid in sorted(jobs)])
        copy_table(conn, job_timeline, timeline)
        for workspace, quota in sorted(bound.items()):
            conn.execute(
                pg_insert(job_workspace_quotas)
                .values(workspace=workspace, quota=quota)
                .on_conflict_do_update(index_elements=["workspace"], set_={"quota": quota})
            )


def _rows_elsewhere(
    event: RecordedEvent, named: list[tuple[str, str | None, str | None]]
) -> list[tuple[Any, ...]]:
    """``job_timeline`` rows of ``event`` for the ``named`` jobs whose own stream it is not
    on (their timelines cannot find it in the store by stream)."""
    stream = event.stream
    return [
        _timeline_row(event, uid, by, reason) for uid, by, reason in named if stream != f"job/{uid}"
    ]


def _timeline_row(event: RecordedEvent, uid: str, by: Any, reason: Any) -> tuple[Any, ...]:
    """A ``job_timeline`` row (table order): the event as seen from job ``uid``."""
    return (
        uid,
        event.position,
        event.occurred_at,
        event.type,
        _summary(event.type, event.data, uid),
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
            job.open_occupancies = [*job.open_occupancies, occupancy]
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
    hidden = ("running_since", "open_occupancies", "last_position", "events", "running_us")
    out = {k: _jsonable(v) for k, v in m.items() if k not in hidden}
    out["running_seconds"] = _jsonable(Decimal(m["running_us"]) / 1_000_000)
    out["open_occupancies"] = len(m["open_occupancies"])
    return out


def list_jobs(
    conn: Connection,
    *,
    workspace: str | None = None,
    status: str | None = None,
    user: str | None = None,
    limit: int = 50,
) -> list[dict[str, Any]]:
    """Jobs, newest submission first, filtered; JSON-ready dicts."""
    if status is not None and status not in STATUSES:
        raise ValueError(f"unknown status {status!r}; one of {', '.join(STATUSES)}")
    query = job_state.select()
    if workspace is not None:
        query = query.where(job_state.c.workspace == workspace)
    if status is not None:
        query = query.where(job_state.c.status == status)
    if user is not None:
        query = query.where(job_state.c.user == user)
    query = query.order_by(job_state.c.submitted_at.desc().nulls_last(), job_state.c.job_uid).limit(
        limit
    )
    return [_job_dict(row) for row in conn.execute(query)]


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


def job_detail(conn: Connection, uid: str) -> dict[str, Any]:
    """One job: state, occupied resource-seconds per flavor (closed occupancies), timeline."""
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
    detail["timeline"] = [
        {k: _jsonable(v) for k, v in zip(_TIMELINE_COLUMNS, row, strict=True) if k != "job_uid"}
        | {"event_id": str(row[-1])}
        for row in timeline_rows(conn, uid)
    ]
    return detail


_TIMELINE_COLUMNS = tuple(c.name for c in job_timeline.columns)


def timeline_rows(conn: Connection, uid: str) -> list[tuple[Any, ...]]:
    """Job ``uid``'s timeline as of the projection's checkpoint: ``job_timeline`` rows in
    table order, position order.

    The events of the job's own stream come from the store itself (append-only, indexed
    by stream), read up to the checkpoint so they match ``job_state``; the table holds
    only the events about the job recorded elsewhere (decisions, another job's stream).
    """
    upto = PostgresUnitOfWork(conn).load_checkpoint(checkpoint_name(JobsProjection())).position
    stored = conn.execute(
        job_timeline.select().where(job_timeline.c.job_uid == uid, job_timeline.c.position <= upto)
    )
    rows: list[tuple[Any, ...]] = [tuple(r) for r in stored]  # in order once merged below
    for event in PostgresEventStore.read_stream_on(conn, f"job/{uid}", upto=upto):
        by, reason = next((b, r) for u, b, r in _named_jobs(event) if u == uid)
        rows.append(_timeline_row(event, uid, by, reason))
    rows.sort(key=lambda r: int(r[1]))
    return rows
