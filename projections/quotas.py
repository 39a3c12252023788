"""Quota tree and raw quota usage over cluster time: the facts behind "who uses,
borrows and lends what, and when".

Kafka keeps order per job only, so the store's positions are not cluster-time order
across jobs (in the openb replay almost every pod event arrives after later ones). The
projection therefore keeps nothing that depends on arrival order across jobs: it
records each event's effect as signed changes of raw usage per leaf quota and flavor,
stamped with the cluster time it happened at (``quota_changes``), and the tree's
changes likewise (``quota_tree_history``). Sums of changes commute, so a late event
simply lands at its own instant; the figures at any instant, and the change points of
any window, are derived at read time (:mod:`projections.quota_reads`,
:mod:`ledger.usage_boards`).

Tables (migrations ``0003_quotas``, ``0006_quota_changes``, ``0009_quota_change_hours``,
``0010_quota_change_days``):

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
- ``quota_jobs``, ``quota_occupancies``: the fold's state (each job's quota, state and
  latest change time; each pod's quota, resources and interval).

Rules (also in ``docs/quotas.md``):

- a job's quota is its JobSubmitted ``quota``, else the quota its workspace is bound to
  at submission (a job seen first through its pod: the pod's ``quota``, else the
  binding then); a job with neither counts under quota ``-``, and so does usage whose
  quota is, at the instant read, deleted or not a leaf;
- used = open pods' resources (``gpu/<model>``/``gpu/any`` in mGPU from the pod's
  flavor, ``cpu`` in milli-cores, ``memory`` in MiB) from the pod's ``started_at`` to
  its ``ended_at``; idle-mode pods always count as borrowed;
- queued demand = requested resources (replicas x count) of jobs submitted and not yet
  admitted, started or running (JobQueued and JobPreempted put a job back in the queue);
  JobSucceeded / Failed / Stopped / Deleted end a job's queued and running counts;
- a job's state changes are stamped no earlier than its previous one, and a pod's end
  no earlier than its start, so no instant ever shows negative usage or counts.
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

from ledger.events import JOB_LIFECYCLE_TYPES, QuotaSpec
from ledger.quotas import NO_QUOTA
from ledger.store.base import RecordedEvent
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
    Column("state", Text, nullable=False),
    Column("requested", JSONB, nullable=False),
    Column("submitted_at", _TS, nullable=False),
    Column("changed_at", _TS, nullable=False),
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
)

_JOB_EVENTS = JOB_LIFECYCLE_TYPES
_QUEUE = frozenset({"JobQueued", "JobPreempted"})
_RUN = frozenset({"JobAdmitted", "JobStarted", "JobRestarted"})
_END = frozenset({"JobSucceeded", "JobFailed", "JobStopped", "JobDeleted"})
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


@dataclass
class _Job:
    uid: str
    workspace: str | None
    quota: str
    billing_mode: str
    state: str  # queued | running | done
    requested: dict[str, int]
    submitted_at: datetime
    changed_at: datetime

    def row(self) -> tuple[Any, ...]:
        return (
            self.uid,
            self.workspace,
            self.quota,
            self.billing_mode,
            self.state,
            _dumps(self.requested),
            self.submitted_at,
            self.changed_at,
        )


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

    def _contribute(self, job: _Job, sign: int, position: int) -> None:
        if job.state == "queued":
            per = self._changes(job.changed_at, position, job.quota)
            for flavor, qty in job.requested.items():
                values = per[flavor]
                values[_QUEUED] += sign * qty
                values[_QJOBS] += sign
        elif job.state == "running":
            per = self._changes(job.changed_at, position, job.quota)
            for flavor in job.requested:
                per[flavor][_RUNNING] += sign

    def _enter(self, job: _Job, state: str, at: datetime, position: int) -> None:
        if job.state == state or job.state == "done":
            return
        # a job's own events arrive in order; stamping a change no earlier than the
        # previous one keeps every instant's counts non-negative whatever the clocks said
        job.changed_at = max(job.changed_at, at)
        self._contribute(job, -1, position)
        job.state = state
        self._contribute(job, +1, position)

    def _quota_for(self, quota: str | None, workspace: str | None) -> str:
        if quota:
            return quota
        bound = self.bindings.get(workspace or "")
        return bound[0] if bound else NO_QUOTA

    def _new_job(
        self, data: Mapping[str, Any], state: str, requested: dict[str, int], at: datetime
    ) -> _Job:
        job = _Job(
            uid=data["job_uid"],
            workspace=data.get("workspace"),
            quota=self._quota_for(data.get("quota"), data.get("workspace")),
            billing_mode=data.get("billing_mode", "public"),
            state=state,
            requested=requested,
            submitted_at=at,
            changed_at=at,
        )
        self.jobs[job.uid] = job
        return job

    # --- events ----------------------------------------------------------------

    def apply(self, kind: str, data: Mapping[str, Any], at: datetime, position: int) -> None:
        if kind in _TREE_EVENTS:
            self._tree(kind, data, at, position)
        elif kind == "JobSubmitted":
            if data["job_uid"] not in self.jobs:
                job = self._new_job(data, "queued", _requested(data.get("replicas", ())), at)
                self._contribute(job, +1, position)
        elif kind in _JOB_EVENTS:
            job_or_none = self.jobs.get(data["job_uid"])
            if job_or_none is None:
                return
            if kind in _QUEUE:
                self._enter(job_or_none, "queued", at, position)
            elif kind in _RUN:
                self._enter(job_or_none, "running", at, position)
            elif kind in _END:
                self._enter(job_or_none, "done", at, position)
        elif kind == "OccupancyStarted":
            self._started(data, at, position)
        elif kind == "OccupancyEnded":
            occ = self.occs.get(data["occupancy_id"])
            if occ is None or not occ.open:
                return
            occ.open = False
            occ.ended_at = ended = max(_instant(data.get("ended_at"), at), occ.started_at)
            self._occupy(occ, -1, ended, position)

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
        job = self.jobs.get(data["job_uid"])
        if job is None:
            job = self._new_job(data, "running", dict(resources), at)
            self._contribute(job, +1, position)
        else:
            self._enter(job, "running", at, position)
        idle = data.get("billing_mode") == "idle" or job.billing_mode == "idle"
        occ = _Occ(
            occupancy_id,
            job.uid,
            job.quota,
            idle,
            resources,
            True,
            _instant(data.get("started_at"), at),
        )
        self.occs[occupancy_id] = occ
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

    def apply(self, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        fold = self._load(conn, *_named(events))
        for event in events:
            fold.apply(event.type, event.data, event.occurred_at, event.position)
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
