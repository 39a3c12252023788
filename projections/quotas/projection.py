"""Quota tree and raw quota usage over cluster time: the facts behind "who uses,
borrows and lends what, and when".

Kafka keeps order per job only, so the store's positions are not cluster-time order
across jobs (in the openb replay almost every pod event arrives after later ones). The
projection therefore keeps nothing that depends on arrival order across jobs: it
records each event's effect as signed changes of raw usage per leaf quota and flavor,
stamped with the cluster time it happened at (``quota_changes``), and the tree's
changes likewise (``quota_tree_history``). Sums of changes commute, so a late event
simply lands at its own instant; the figures at any instant, and the change points of
any window, are derived at read time (:mod:`projections.quotas.reads`,
:mod:`ledger.usage_boards`).

Tables (migrations ``0003_quotas``, ``0006_quota_changes``, ``0009_quota_change_hours``,
``0010_quota_change_days``, ``0013_quota_job_intervals``):

- ``quota_nodes`` / ``quota_workspaces``: the current tree and bindings, in arrival
  order (``dlc-ledger quotas apply`` diffs against them);
- ``quota_tree_history``: every spec a quota had, from when (``spec`` null: deleted);
- ``quota_changes``: per change point (a page's events at one instant in one leaf
  quota, keyed by the first one's position), per flavor, the change of used,
  idle-mode used, queued demand, running jobs and queued jobs;
- ``quota_change_hours`` / ``quota_change_days``: ``quota_changes`` summed per UTC hour
  (day), quota and flavor (so reading an instant sums days, then at most a day of hours,
  then at most an hour of change rows);
- ``quota_own_usage``: the running totals of ``quota_changes`` (the latest raw usage);
- ``quota_jobs``, ``quota_occupancies``: the fold's state (each job's quota, request,
  submission, first end and pods' intervals; each pod's quota, resources and interval).

Rules (also in ``docs/quotas.md``):

- a job's quota is its JobSubmitted ``quota``, else the quota its workspace is bound to
  at submission (a job seen first through its pod: the pod's ``quota``, else the
  binding then); a job with neither counts under quota ``-``, and so does usage whose
  quota is, at the instant read, deleted or not a leaf;
- used = open pods' resources (``gpu/<model>``/``gpu/any`` in mGPU from the pod's
  flavor, ``cpu`` in milli-cores, ``memory`` in MiB) from the pod's ``started_at`` to
  its ``ended_at``; idle-mode pods always count as borrowed;
- a job runs while one of its pods occupies; it is queued from its submission until its
  end (JobSucceeded / Failed / Stopped / Deleted) whenever it does not occupy (before its
  first pod, between pods); queued demand = its requested resources (replicas x count)
  then. Its row keeps its facts (submission, first end, pods' intervals), and a page
  writes its timeline after minus before, so the order its events arrive in never
  matters (its end may be stored before its start: two watchers publish them);
- a pod's end is stamped no earlier than its start, so no instant ever shows negative
  usage or counts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    DateTime,
    Table,
    Text,
    select,
)
from sqlalchemy.dialects.postgresql import JSONB

from ledger.events import QuotaSpec
from ledger.quotas import NO_QUOTA
from ledger.store.base import RecordedEvent, UnitOfWork
from ledger.store.schema import metadata
from ledger.usage_boards import RAW
from projections.base import Projection
from projections.bulk import copy_table, driver, take_rows, upsert_rows

__all__ = [
    "QuotaProjection",
    "day_of",
    "hour_index",
    "hour_of",
    "quota_change_days",
    "quota_change_hours",
    "quota_changes",
    "quota_jobs",
    "quota_nodes",
    "quota_occupancies",
    "quota_own_usage",
    "quota_tree_history",
    "quota_workspaces",
]

_TS = DateTime(timezone=True)

quota_nodes = Table(
    "quota_nodes",
    metadata,
    Column("quota_id", Text, primary_key=True),
    Column("parent", Text),
    Column("spec", JSONB, nullable=False),
    Column("created_at", _TS, nullable=False),
    Column("changed_at", _TS, nullable=False),
    Column("position", BigInteger, nullable=False),
)
quota_workspaces = Table(
    "quota_workspaces",
    metadata,
    Column("workspace", Text, primary_key=True),
    Column("quota", Text, nullable=False),
    Column("bound_at", _TS, nullable=False),
    Column("position", BigInteger, nullable=False),
)
quota_tree_history = Table(
    "quota_tree_history",
    metadata,
    Column("at", _TS, primary_key=True),
    Column("position", BigInteger, primary_key=True),
    Column("quota_id", Text, primary_key=True),
    Column("spec", JSONB),  # null: deleted
)
quota_jobs = Table(
    "quota_jobs",
    metadata,
    Column("job_uid", Text, primary_key=True),
    Column("workspace", Text),
    Column("quota", Text, nullable=False),
    Column("billing_mode", Text, nullable=False),
    Column("requested", JSONB, nullable=False),
    Column("submitted_at", _TS, nullable=False),
    Column("submitted", Boolean, nullable=False),  # its JobSubmitted seen (else: a pod's)
    Column("ended_at", _TS),  # its first end (JobSucceeded / Failed / Stopped / Deleted)
    # {occupancy id: [start, end or null]} in microseconds since the epoch: the job's
    # intervals, from which its queued / running timeline is derived
    Column("occupied", JSONB, nullable=False),
)
quota_occupancies = Table(
    "quota_occupancies",
    metadata,
    Column("occupancy_id", Text, primary_key=True),
    Column("job_uid", Text, nullable=False),
    Column("quota", Text, nullable=False),
    Column("idle", Boolean, nullable=False),
    Column("resources", JSONB, nullable=False),
    Column("open", Boolean, nullable=False),
    Column("started_at", _TS),
    Column("ended_at", _TS),
)
quota_changes = Table(
    "quota_changes",
    metadata,
    Column("at", _TS, primary_key=True),
    Column("position", BigInteger, primary_key=True),
    Column("quota", Text, nullable=False),
    # {flavor: [used, idle_used, queued, running_jobs, queued_jobs]}: one row per change
    # point (instant and quota within a page), not per event and flavor
    Column("changes", JSONB, nullable=False),
)


# the changes summed per UTC hour and per UTC day: an instant's usage is then the days
# before its own, its day's hours before its own and at most one hour of change rows, not
# every change row on one side of it
def _change_sums(name: str, period: str) -> Table:
    return Table(
        name,
        metadata,
        Column(period, _TS, primary_key=True),
        Column("quota", Text, primary_key=True),
        Column("flavor", Text, primary_key=True),
        *(Column(n, BigInteger, nullable=False) for n in RAW),
    )


quota_change_hours = _change_sums("quota_change_hours", "hour")
quota_change_days = _change_sums("quota_change_days", "day")
quota_own_usage = Table(
    "quota_own_usage",
    metadata,
    Column("quota", Text, primary_key=True),
    Column("flavor", Text, primary_key=True),
    *(Column(n, BigInteger, nullable=False) for n in RAW),
    # the key's first change: reading an instant subtracts the changes after it from
    # these totals, and a key first changed after that instant must not show
    Column("first_at", _TS, nullable=False),
)

_END = frozenset({"JobSucceeded", "JobFailed", "JobStopped", "JobDeleted"})
# a job's other lifecycle events (queued, admitted, started, preempted ...) change nothing
# here: its queued and running spans are its submission, its pods' intervals and its end
_JOB_EVENTS = frozenset({"JobSubmitted"}) | _END
_TREE_EVENTS = frozenset({"QuotaCreated", "QuotaChanged", "QuotaDeleted", "WorkspaceBound"})
_OCC_EVENTS = frozenset({"OccupancyStarted", "OccupancyEnded"})

# raw usage columns (RAW order)
_USED, _IDLE, _QUEUED, _RUNNING, _QJOBS = range(5)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def hour_index(at: datetime) -> int:
    """Whole hours from the Unix epoch to ``at``, floored (integers: no float rounding)."""
    delta = at - _EPOCH
    return (delta.days * 86_400 + delta.seconds) // 3600


def _hour_start(index: int) -> datetime:
    """The start of hour ``index`` (counted as :func:`hour_index` counts)."""
    return _EPOCH + timedelta(hours=index)


def hour_of(at: datetime) -> datetime:
    """The UTC hour ``at`` falls in (the key of ``quota_change_hours``): the writes and
    the reads both bucket through :func:`hour_index`."""
    return _hour_start(hour_index(at))


def _day_first_hour(index: int) -> int:
    """The index of the first hour of the UTC day holding hour ``index``."""
    return index // 24 * 24


def day_of(at: datetime) -> datetime:
    """The UTC day ``at`` falls in (the key of ``quota_change_days``): the writes and the
    reads both bucket through :func:`_day_first_hour`, so a day holds exactly its 24
    hours' sums."""
    return _hour_start(_day_first_hour(hour_index(at)))


def _dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _zeros() -> list[int]:
    return [0, 0, 0, 0, 0]


_MICRO = timedelta(microseconds=1)
# a job's state on its timeline
_NONE, _QUEUED_STATE, _RUNNING_STATE = 0, 1, 2


def _micros(at: datetime) -> int:
    """Microseconds from the Unix epoch (the job rows' interval unit: exact, JSON-friendly)."""
    return (at - _EPOCH) // _MICRO


def _from_micros(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


@dataclass
class _Job:
    """A job's facts, whatever order they arrived in; its queued / running timeline is a
    function of them (:meth:`timeline`), never of the order of its events."""

    uid: str
    workspace: str | None
    quota: str
    billing_mode: str
    requested: dict[str, int]
    submitted_at: datetime
    submitted: bool
    ended_at: datetime | None
    occupied: dict[str, list[int | None]]  # occupancy id -> [start, end or None] in µs

    def row(self) -> tuple[Any, ...]:
        return (
            self.uid,
            self.workspace,
            self.quota,
            self.billing_mode,
            _dumps(self.requested),
            self.submitted_at,
            self.submitted,
            self.ended_at,
            _dumps(self.occupied),
        )

    def timeline(self) -> dict[int, tuple[int, int]]:
        """Instant (µs) -> the change of (queued, running) there.

        Running while any of its pods occupies (``[start, end)``); queued from its
        submission until it ends, whenever it does not occupy (before its first pod, and
        between pods: a preempted or restarting job waits again); nothing otherwise.
        """
        submitted = _micros(self.submitted_at)
        ended = _micros(self.ended_at) if self.ended_at is not None else None
        deltas: dict[int, int] = {submitted: 0}
        if ended is not None:
            deltas.setdefault(ended, 0)
        for start, end in self.occupied.values():
            assert start is not None
            if end is not None and end <= start:
                continue  # an empty interval occupies nothing
            deltas[start] = deltas.get(start, 0) + 1
            if end is not None:
                deltas[end] = deltas.get(end, 0) - 1
        out: dict[int, tuple[int, int]] = {}
        active = 0
        before = _NONE
        for instant in sorted(deltas):
            active += deltas[instant]
            if active > 0:
                state = _RUNNING_STATE
            elif submitted <= instant and (ended is None or instant < ended):
                state = _QUEUED_STATE
            else:
                state = _NONE
            if state != before:
                out[instant] = (
                    (state == _QUEUED_STATE) - (before == _QUEUED_STATE),
                    (state == _RUNNING_STATE) - (before == _RUNNING_STATE),
                )
                before = state
        return out


@dataclass
class _Occ:
    occupancy_id: str
    job_uid: str
    quota: str
    idle: bool
    resources: dict[str, int]
    open: bool
    started_at: datetime
    ended_at: datetime | None = None

    def row(self) -> tuple[Any, ...]:
        return (
            self.occupancy_id,
            self.job_uid,
            self.quota,
            self.idle,
            _dumps(self.resources),
            self.open,
            self.started_at,
            self.ended_at,
        )


def _instant(value: Any, default: datetime) -> datetime:
    """An event's own timestamp field (ISO text in stored payloads), else ``default``."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return default


def _resources(
    flavor: str, mgpu: int, cpu_milli: int, memory_mib: int, n: int = 1
) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, qty in ((flavor, mgpu), ("cpu", cpu_milli), ("memory", memory_mib)):
        if qty * n > 0:
            out[key] = out.get(key, 0) + qty * n
    return out


def _requested(replicas: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in replicas:
        part = _resources(
            r.get("flavor", "gpu/any"),
            int(r.get("mgpu", 0)),
            int(r.get("cpu_milli", 0)),
            int(r.get("memory_mib", 0)),
            int(r.get("count", 1)),
        )
        for key, qty in part.items():
            out[key] = out.get(key, 0) + qty
    return out


@dataclass
class _Fold:
    """One page's working state: the rows it took out of the tables, and what it changes.

    ``jobs`` and ``occs`` hold every row taken out plus those the page creates; all of
    them go back when the page is saved.
    """

    specs: dict[str, QuotaSpec]
    created: dict[str, tuple[datetime, datetime, int]]  # quota -> created_at, changed_at, pos
    bindings: dict[str, tuple[str, datetime, int]]
    jobs: dict[str, _Job]
    occs: dict[str, _Occ]
    tree_changed: bool = False
    bindings_changed: bool = False
    tree_rows: list[tuple[datetime, int, str, str | None]] = field(default_factory=list)
    # (at, quota) -> the first contributing event's position, flavor -> RAW deltas
    changes: dict[tuple[datetime, str], tuple[int, defaultdict[str, list[int]]]] = field(
        default_factory=dict
    )
    # job uid -> the first position of the page naming it, its request and its timeline
    # before the page
    before: dict[str, tuple[int, dict[str, int], dict[int, tuple[int, int]]]] = field(
        default_factory=dict
    )

    # --- raw usage -------------------------------------------------------------

    def _changes(self, at: datetime, position: int, quota: str) -> defaultdict[str, list[int]]:
        """The RAW deltas per flavor at one instant in one quota (a hot path: every event
        of a page lands here a few times).

        A page's events at the same instant in the same quota share one change row, keyed
        by the first one's position (unique across pages): readers only ever sum changes
        up to an instant, so one row per change point holds the same figures as one per
        event, in two fifths of the rows on the bench's replay shape (a job's submit, start
        and first pod often share an instant, as do its last pod's end and its own).
        """
        key = (at, quota)
        entry = self.changes.get(key)
        if entry is None:
            entry = self.changes[key] = (position, defaultdict(_zeros))
        return entry[1]

    def _touch(self, job: _Job, position: int) -> None:
        """Remember ``job``'s timeline before the page's first event about it: the page's
        changes are then the difference between its timeline after and this one."""
        if job.uid not in self.before:
            self.before[job.uid] = (position, dict(job.requested), job.timeline())

    def job_changes(self) -> None:
        """Each job the page touched: its new timeline minus its old one, as changes of
        queued demand and of running / queued counts (a late fact moves the instants it
        bears on; the sums at any instant are those of every job's own timeline)."""
        for uid, (position, requested, old) in self.before.items():
            job = self.jobs[uid]
            new = job.timeline()
            if requested == job.requested:
                steps = _diff(new, old)
                self._steps(job.quota, position, requested, steps)
            else:  # a pod's request replaced by its job's: take the old one back whole
                self._steps(job.quota, position, requested, _diff({}, old))
                self._steps(job.quota, position, job.requested, new)

    def _steps(
        self,
        quota: str,
        position: int,
        requested: Mapping[str, int],
        steps: Mapping[int, tuple[int, int]],
    ) -> None:
        for instant, (queued, running) in steps.items():
            per = self._changes(_from_micros(instant), position, quota)
            for flavor, qty in requested.items():
                values = per[flavor]
                values[_QUEUED] += queued * qty
                values[_QJOBS] += queued
                values[_RUNNING] += running

    def _quota_for(self, quota: str | None, workspace: str | None) -> str:
        if quota:
            return quota
        bound = self.bindings.get(workspace or "")
        return bound[0] if bound else NO_QUOTA

    def _new_job(
        self,
        data: Mapping[str, Any],
        requested: dict[str, int],
        at: datetime,
        position: int,
        *,
        submitted: bool,
    ) -> _Job:
        job = _Job(
            uid=data["job_uid"],
            workspace=data.get("workspace"),
            quota=self._quota_for(data.get("quota"), data.get("workspace")),
            billing_mode=data.get("billing_mode", "public"),
            requested=requested,
            submitted_at=at,
            submitted=submitted,
            ended_at=None,
            occupied={},
        )
        self.jobs[job.uid] = job
        self.before[job.uid] = (position, dict(requested), {})
        return job

    # --- events ----------------------------------------------------------------

    def apply(self, kind: str, data: Mapping[str, Any], at: datetime, position: int) -> None:
        if kind in _TREE_EVENTS:
            self._tree(kind, data, at, position)
        elif kind == "JobSubmitted":
            requested = _requested(data.get("replicas", ()))
            job = self.jobs.get(data["job_uid"])
            if job is None:
                self._new_job(data, requested, at, position, submitted=True)
            elif not job.submitted or at < job.submitted_at:
                # its pod came first (or a re-observation stamped earlier): the job's own
                # submission and request stand (the earliest JobSubmitted, whatever its
                # pods say); its quota never moves
                self._touch(job, position)
                job.submitted_at = min(job.submitted_at, at) if job.submitted else at
                if not job.submitted:
                    job.submitted, job.requested = True, requested
        elif kind in _END:
            job = self.jobs.get(data["job_uid"])
            if job is not None and (job.ended_at is None or at < job.ended_at):
                self._touch(job, position)
                job.ended_at = at
        elif kind == "OccupancyStarted":
            self._started(data, at, position)
        elif kind == "OccupancyEnded":
            occ = self.occs.get(data["occupancy_id"])
            if occ is None or not occ.open:
                return
            occ.open = False
            occ.ended_at = ended = max(_instant(data.get("ended_at"), at), occ.started_at)
            self._occupy(occ, -1, ended, position)
            job = self.jobs[occ.job_uid]
            self._touch(job, position)
            interval = job.occupied.get(occ.occupancy_id)
            if interval is not None:
                interval[1] = _micros(ended)
        # JobQueued / Admitted / Started / Restarted / Preempted: a job's queued and
        # running spans come from its submission, its pods' intervals and its end

    def _started(self, data: Mapping[str, Any], at: datetime, position: int) -> None:
        occupancy_id = data["occupancy_id"]
        if occupancy_id in self.occs:
            return
        resources = _resources(
            data.get("flavor", "gpu/any"),
            int(data.get("mgpu", 0)),
            int(data.get("cpu_milli", 0)),
            int(data.get("memory_mib", 0)),
        )
        started = _instant(data.get("started_at"), at)
        job = self.jobs.get(data["job_uid"])
        if job is None:
            job = self._new_job(data, dict(resources), started, position, submitted=False)
        else:
            self._touch(job, position)
            if not job.submitted and started < job.submitted_at:
                job.submitted_at = started
        idle = data.get("billing_mode") == "idle" or job.billing_mode == "idle"
        occ = _Occ(occupancy_id, job.uid, job.quota, idle, resources, True, started)
        self.occs[occupancy_id] = occ
        job.occupied[occupancy_id] = [_micros(started), None]
        self._occupy(occ, +1, occ.started_at, position)

    def _occupy(self, occ: _Occ, sign: int, at: datetime, position: int) -> None:
        per = self._changes(at, position, occ.quota)
        for flavor, qty in occ.resources.items():
            values = per[flavor]
            values[_USED] += sign * qty
            if occ.idle:
                values[_IDLE] += sign * qty

    def _tree(self, kind: str, data: Mapping[str, Any], at: datetime, position: int) -> None:
        if kind in ("QuotaCreated", "QuotaChanged"):
            spec = QuotaSpec.model_validate(data["spec"])
            before = self.created.get(spec.quota_id)
            self.specs[spec.quota_id] = spec
            self.created[spec.quota_id] = (before[0] if before else at, at, position)
            self.tree_rows.append((at, position, spec.quota_id, _spec_json(spec)))
        elif kind == "QuotaDeleted":
            self.specs.pop(data["quota_id"], None)
            self.created.pop(data["quota_id"], None)
            self.tree_rows.append((at, position, data["quota_id"], None))
        else:
            quota = data.get("quota")
            if quota:
                self.bindings[data["workspace"]] = (quota, at, position)
            else:
                self.bindings.pop(data["workspace"], None)
            self.bindings_changed = True  # a binding changes only future jobs' quotas
            return
        self.tree_changed = True


def _diff(
    new: Mapping[int, tuple[int, int]], old: Mapping[int, tuple[int, int]]
) -> dict[int, tuple[int, int]]:
    """Timeline ``new`` minus timeline ``old``, instant by instant (zero changes left out)."""
    out: dict[int, tuple[int, int]] = {}
    for instant in new.keys() | old.keys():
        q1, r1 = new.get(instant, (0, 0))
        q0, r0 = old.get(instant, (0, 0))
        if q1 != q0 or r1 != r0:
            out[instant] = (q1 - q0, r1 - r0)
    return out


def _add(sums: dict[Any, list[Any]], key: Any, values: list[Any], at: datetime) -> None:
    """Add the five RAW ``values`` to ``sums[key]``, whose sixth item is the first instant."""
    total = sums.get(key)
    if total is None:
        sums[key] = [*values[:5], at]
        return
    # unrolled: a page's every change point and flavor passes here
    total[0] += values[0]
    total[1] += values[1]
    total[2] += values[2]
    total[3] += values[3]
    total[4] += values[4]
    if at < total[5]:
        total[5] = at


_RAW_TYPES = [(n, "bigint") for n in RAW]


def _add_sums(
    cur: Any,
    table: str,
    columns: Sequence[tuple[str, str]],
    rows: Sequence[tuple[Any, ...]],
    *,
    key: int,
    also: str = "",
) -> None:
    """Add ``rows``' RAW figures to ``table``'s, inserting the keys it lacks, in one
    statement (``columns``: name and type of each value, in row order, the first ``key``
    of them the key). Keys must be unique within ``rows``.
    """
    if not rows:
        return
    names = [n for n, _ in columns]
    arrays = ", ".join(f"%s::{t}[]" for _, t in columns)
    added = [f"{n} = {table}.{n} + EXCLUDED.{n}" for n in RAW]
    if also:
        added.append(also)
    cur.execute(
        f"INSERT INTO {table} ({', '.join(names)}) SELECT * FROM unnest({arrays}) "
        f"ON CONFLICT ({', '.join(names[:key])}) DO UPDATE SET {', '.join(added)}",
        [list(column) for column in zip(*rows, strict=True)],
    )


def _spec_json(spec: QuotaSpec) -> str:
    return _dumps(spec.model_dump(mode="json"))


def _named(events: Sequence[RecordedEvent]) -> tuple[set[str], set[str]]:
    """The job uids and the occupancy ids ``events`` name: the fold state a page needs."""
    uids: set[str] = set()
    occupancies: set[str] = set()
    for event in events:
        data = event.data
        uid = data.get("job_uid")
        if isinstance(uid, str):
            uids.add(uid)
        if event.type in _OCC_EVENTS:
            occupancies.add(data["occupancy_id"])
    return uids, occupancies


class QuotaProjection(Projection):
    """Folds quota, workspace, job and occupancy events into the quota tables."""

    name = "quotas"
    cost = 3.9
    tables = (
        quota_changes,
        quota_change_days,
        quota_change_hours,
        quota_own_usage,
        quota_occupancies,
        quota_jobs,
        quota_tree_history,
        quota_workspaces,
        quota_nodes,
    )
    event_types = _TREE_EVENTS | _JOB_EVENTS | _OCC_EVENTS

    def apply(self, uow: UnitOfWork, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        fold = self._load(conn, *_named(events))
        for event in events:
            fold.apply(event.type, event.data, event.occurred_at, event.position)
        fold.job_changes()
        self._save(conn, fold)

    @staticmethod
    def _load(conn: Connection, uids: set[str], occupancies: set[str]) -> _Fold:
        specs: dict[str, QuotaSpec] = {}
        created: dict[str, tuple[datetime, datetime, int]] = {}
        for row in conn.execute(select(quota_nodes)):
            specs[row.quota_id] = QuotaSpec.model_validate(row.spec)
            created[row.quota_id] = (row.created_at, row.changed_at, row.position)
        bindings = {
            row.workspace: (row.quota, row.bound_at, row.position)
            for row in conn.execute(select(quota_workspaces))
        }
        # columns in _Job's and _Occ's field order
        jobs = {row[0]: _Job(*row) for row in take_rows(conn, quota_jobs, "job_uid", uids)}
        # only a pod's own events read its row (a job's rows would rewrite its ended pods)
        occs = {
            row[0]: _Occ(*row)
            for row in take_rows(conn, quota_occupancies, "occupancy_id", occupancies)
        }
        return _Fold(specs, created, bindings, jobs, occs)

    @staticmethod
    def _save(conn: Connection, fold: _Fold) -> None:
        if fold.tree_changed:  # a tree is tens of nodes: rewrite it
            conn.execute(quota_nodes.delete())
            upsert_rows(
                conn,
                quota_nodes,
                [
                    (q, fold.specs[q].parent, _spec_json(fold.specs[q]), *fold.created[q])
                    for q in sorted(fold.specs)
                ],
                key=["quota_id"],
            )
            copy_table(conn, quota_tree_history, fold.tree_rows)
        if fold.bindings_changed:
            conn.execute(quota_workspaces.delete())
            upsert_rows(
                conn,
                quota_workspaces,
                [(ws, *fold.bindings[ws]) for ws in sorted(fold.bindings)],
                key=["workspace"],
            )
        # everything taken out in _load goes back, folded
        copy_table(conn, quota_jobs, [fold.jobs[uid].row() for uid in sorted(fold.jobs)])
        copy_table(conn, quota_occupancies, [fold.occs[o].row() for o in sorted(fold.occs)])
        rows = []
        # (hours since the epoch, quota, flavor) -> the page's RAW sums, then its first instant
        hours: dict[tuple[int, str, str], list[Any]] = {}
        for (at, quota), (position, per) in fold.changes.items():
            nonzero = {flavor: v for flavor, v in per.items() if any(v)}
            if not nonzero:
                continue
            # jsonb keeps its own key order: no need to sort them here
            rows.append((at, position, quota, orjson.dumps(nonzero)))
            hour = hour_index(at)
            for flavor, v in nonzero.items():
                _add(hours, (hour, quota, flavor), v, at)
        copy_table(conn, quota_changes, rows)
        days: dict[tuple[int, str, str], list[Any]] = {}
        totals: dict[tuple[str, str], list[Any]] = {}
        for (hour, quota, flavor), sums in hours.items():
            _add(days, (_day_first_hour(hour), quota, flavor), sums, sums[5])
            _add(totals, (quota, flavor), sums, sums[5])
        if totals:  # add the page's sums to the running totals and to the hours' and days' sums
            with driver(conn).cursor() as cur:
                _add_sums(
                    cur,
                    "quota_own_usage",
                    [
                        ("quota", "text"),
                        ("flavor", "text"),
                        *_RAW_TYPES,
                        ("first_at", "timestamptz"),
                    ],
                    [(*k, *v) for k, v in sorted(totals.items())],
                    key=2,
                    also="first_at = least(quota_own_usage.first_at, EXCLUDED.first_at)",
                )
                for table, column, sums_by in (("hours", "hour", hours), ("days", "day", days)):
                    _add_sums(
                        cur,
                        f"quota_change_{table}",
                        [
                            (column, "timestamptz"),
                            ("quota", "text"),
                            ("flavor", "text"),
                            *_RAW_TYPES,
                        ],
                        [
                            (_hour_start(h), q, f, *v[:5])
                            for (h, q, f), v in sorted(sums_by.items())
                        ],
                        key=3,
                    )
