"""Quota tree and quota usage over time: "who uses, borrows and lends what, and when".

Tables (migration ``0003_quotas``):

- ``quota_nodes`` / ``quota_workspaces``: the current tree (spec per quota node) and
  which workspace is bound to which quota; ``dlc-ledger quotas apply`` diffs against them;
- ``quota_usage_history``: change points per quota node x flavor: at each instant where
  something changes, the new min, max, used, borrowed, lent, queued demand, running and
  queued job counts and over-admission of every affected node (a deleted quota gets a
  ``deleted`` row), so any window can be charted and any instant answered;
- ``quota_usage``: the latest row per quota node x flavor;
- ``quota_jobs``, ``quota_occupancies``, ``quota_own_usage``, ``quota_projection_state``:
  the fold's own state (each job's quota and status, open pods, per-quota raw usage).

Rules (also in ``docs/quotas.md``):

- a job's quota is its JobSubmitted ``quota``, else the quota its workspace is bound to
  at submission (a job seen first through its pod: the pod's ``quota``, else the
  binding then); a job with neither counts under quota ``-``; so does usage whose quota
  is, at that instant, deleted or not a leaf;
- used = open pods' resources (``gpu/<model>``/``gpu/any`` in mGPU from the pod's
  flavor, ``cpu`` in milli-cores, ``memory`` in MiB), from OccupancyStarted to
  OccupancyEnded; idle-mode pods always count as borrowed;
- queued demand = requested resources (replicas x count) of jobs submitted and not yet
  admitted, started or running (JobQueued and JobPreempted put a job back in the queue);
  JobSucceeded / Failed / Stopped / Deleted end a job's queued and running counts;
- a quota change never evicts: it shows as over-admission;
- the time of a change point is the event's ``occurred_at``; an event older than the
  latest change point already written (a late event) is stamped at that latest
  change point: history is never rewritten, so a rebuild gives identical rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    DateTime,
    Integer,
    Table,
    Text,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

from ledger.events import JOB_LIFECYCLE_TYPES, QuotaSpec
from ledger.quotas import (
    NO_QUOTA,
    FlavorUsage,
    QuotaTree,
    UsageCalculator,
    compute_usage,
    topological_order,
)
from ledger.store.base import RecordedEvent
from ledger.store.schema import metadata
from projections.base import Projection
from projections.bulk import copy_rows, fetch_by_keys, upsert_rows

__all__ = [
    "QuotaProjection",
    "UsageRow",
    "quota_jobs",
    "quota_nodes",
    "quota_occupancies",
    "quota_own_usage",
    "quota_projection_state",
    "quota_tree",
    "quota_usage",
    "quota_usage_history",
    "quota_workspaces",
    "usage_at",
]

_TS = DateTime(timezone=True)
_NUMBERS = (
    "min",
    "max",
    "used",
    "borrowed",
    "lent",
    "queued",
    "running_jobs",
    "queued_jobs",
    "over_admitted",
)

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
)
quota_occupancies = Table(
    "quota_occupancies",
    metadata,
    Column("occupancy_id", Text, primary_key=True),
    Column("job_uid", Text, nullable=False, index=True),
    Column("quota", Text, nullable=False),
    Column("idle", Boolean, nullable=False),
    Column("resources", JSONB, nullable=False),
    Column("open", Boolean, nullable=False),
    Column("started_at", _TS),
    Column("ended_at", _TS),
)
quota_own_usage = Table(
    "quota_own_usage",
    metadata,
    Column("quota", Text, primary_key=True),
    Column("flavor", Text, primary_key=True),
    Column("used", BigInteger, nullable=False),
    Column("idle_used", BigInteger, nullable=False),
    Column("queued", BigInteger, nullable=False),
    Column("running_jobs", BigInteger, nullable=False),
    Column("queued_jobs", BigInteger, nullable=False),
)
quota_usage = Table(
    "quota_usage",
    metadata,
    Column("quota", Text, primary_key=True),
    Column("flavor", Text, primary_key=True),
    Column("at", _TS, nullable=False),
    *(Column(n, BigInteger, nullable=False) for n in _NUMBERS),
    Column("position", BigInteger, nullable=False),
)
quota_usage_history = Table(
    "quota_usage_history",
    metadata,
    Column("quota", Text, primary_key=True),
    Column("flavor", Text, primary_key=True),
    Column("at", _TS, primary_key=True),
    *(Column(n, BigInteger, nullable=False) for n in _NUMBERS),
    Column("deleted", Boolean, nullable=False),
    Column("position", BigInteger, nullable=False),
)
_JOB_COLUMNS = [c.name for c in quota_jobs.columns]
_OCC_COLUMNS = [c.name for c in quota_occupancies.columns]
_USAGE_COLUMNS = [c.name for c in quota_usage.columns]
_HISTORY_COLUMNS = [c.name for c in quota_usage_history.columns]

quota_projection_state = Table(
    "quota_projection_state",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("watermark", _TS),
    Column("instant_position", BigInteger),
    Column("open_deleted", JSONB),  # keys the open instant deleted: [[quota, flavor], ...]
)

_JOB_EVENTS = JOB_LIFECYCLE_TYPES
_QUEUE = frozenset({"JobQueued", "JobPreempted"})
_RUN = frozenset({"JobAdmitted", "JobStarted", "JobRestarted"})
_END = frozenset({"JobSucceeded", "JobFailed", "JobStopped", "JobDeleted"})
_TREE_EVENTS = frozenset({"QuotaCreated", "QuotaChanged", "QuotaDeleted", "WorkspaceBound"})
_OCC_EVENTS = frozenset({"OccupancyStarted", "OccupancyEnded"})

# own usage columns: used, idle_used, queued, running_jobs, queued_jobs
_USED, _IDLE, _QUEUED, _RUNNING, _QJOBS = range(5)


def _dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


@dataclass
class _Job:
    uid: str
    workspace: str | None
    quota: str
    billing_mode: str
    state: str  # queued | running | done
    requested: dict[str, int]
    submitted_at: datetime

    def row(self) -> tuple[Any, ...]:
        return (
            self.uid,
            self.workspace,
            self.quota,
            self.billing_mode,
            self.state,
            _dumps(self.requested),
            self.submitted_at,
        )


@dataclass
class _Occ:
    occupancy_id: str
    job_uid: str
    quota: str
    idle: bool
    resources: dict[str, int]
    open: bool
    started_at: datetime | None = None
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
    """One page's working state: loaded rows, changes, and pending change points."""

    specs: dict[str, QuotaSpec]
    created: dict[str, tuple[datetime, datetime, int]]  # quota -> created_at, changed_at, pos
    bindings: dict[str, tuple[str, datetime, int]]
    jobs: dict[str, _Job]
    occs: dict[str, _Occ]
    own: dict[str, dict[str, list[int]]]  # flavor -> quota -> raw values
    current: dict[tuple[str, str], tuple[Any, ...]]  # numbers tuple (len 9)
    current_at: dict[tuple[str, str], tuple[datetime, int]]  # latest change point per key
    watermark: datetime | None  # the open instant: the latest change point's time
    instant_position: int | None  # position of the open instant's first event
    # value (numbers, (at, position)) of each key just before the open instant, for the
    # keys the open instant changed: a change that cancels out within it leaves no row
    before: dict[tuple[str, str], tuple[tuple[Any, ...] | None, tuple[datetime, int] | None]]
    history: dict[tuple[str, str, datetime], tuple[Any, ...]]
    tree_changed: bool = False
    bindings_changed: bool = False
    dirty_jobs: set[str] = field(default_factory=set)
    dirty_occs: set[str] = field(default_factory=set)
    dirty_own: set[tuple[str, str]] = field(default_factory=set)
    dirty_flavors: dict[str, set[str]] = field(default_factory=dict)  # flavor -> quotas
    usage_changed: bool = False
    loaded_jobs: frozenset[str] = frozenset()
    loaded_occs: frozenset[str] = frozenset()
    whole_tree: bool = False
    calculator: UsageCalculator | None = None
    usage: dict[str, FlavorUsage] = field(default_factory=dict)

    # --- raw usage -------------------------------------------------------------

    def _bump(self, quota: str, flavor: str, column: int, delta: int) -> None:
        per = self.own.get(flavor)
        if per is None:
            per = self.own[flavor] = {}
        values = per.get(quota)
        if values is None:
            values = per[quota] = [0, 0, 0, 0, 0]
        values[column] += delta
        self.dirty_own.add((quota, flavor))
        touched = self.dirty_flavors.get(flavor)
        if touched is None:
            touched = self.dirty_flavors[flavor] = set()
        touched.add(quota)

    def _contribute(self, job: _Job, sign: int) -> None:
        if job.state == "queued":
            for flavor, qty in job.requested.items():
                self._bump(job.quota, flavor, _QUEUED, sign * qty)
                self._bump(job.quota, flavor, _QJOBS, sign)
        elif job.state == "running":
            for flavor in job.requested:
                self._bump(job.quota, flavor, _RUNNING, sign)

    def _enter(self, job: _Job, state: str) -> None:
        if job.state == state or job.state == "done":
            return
        self._contribute(job, -1)
        job.state = state
        self._contribute(job, +1)
        self.dirty_jobs.add(job.uid)

    def _quota_for(self, quota: str | None, workspace: str | None) -> str:
        if quota:
            return quota
        bound = self.bindings.get(workspace or "")
        return bound[0] if bound else NO_QUOTA

    # --- events ----------------------------------------------------------------

    def apply(self, kind: str, data: Mapping[str, Any], at: datetime, position: int) -> None:
        if kind in _TREE_EVENTS:
            self._tree(kind, data, at, position)
        elif kind == "JobSubmitted":
            uid = data["job_uid"]
            if uid in self.jobs:
                return
            job = _Job(
                uid=uid,
                workspace=data.get("workspace"),
                quota=self._quota_for(data.get("quota"), data.get("workspace")),
                billing_mode=data.get("billing_mode", "public"),
                state="queued",
                requested=_requested(data.get("replicas", ())),
                submitted_at=at,
            )
            self.jobs[uid] = job
            self._contribute(job, +1)
            self.dirty_jobs.add(uid)
        elif kind in _JOB_EVENTS:
            job_or_none = self.jobs.get(data["job_uid"])
            if job_or_none is None:
                return
            if kind in _QUEUE:
                self._enter(job_or_none, "queued")
            elif kind in _RUN:
                self._enter(job_or_none, "running")
            elif kind in _END:
                self._enter(job_or_none, "done")
        elif kind == "OccupancyStarted":
            self._started(data, at)
        elif kind == "OccupancyEnded":
            occ = self.occs.get(data["occupancy_id"])
            if occ is None or not occ.open:
                return
            occ.open = False
            occ.ended_at = _instant(data.get("ended_at"), at)
            self.dirty_occs.add(occ.occupancy_id)
            for flavor, qty in occ.resources.items():
                self._bump(occ.quota, flavor, _USED, -qty)
                if occ.idle:
                    self._bump(occ.quota, flavor, _IDLE, -qty)

    def _started(self, data: Mapping[str, Any], at: datetime) -> None:
        occupancy_id = data["occupancy_id"]
        if occupancy_id in self.occs:
            return
        resources = _resources(
            data.get("flavor", "gpu/any"),
            int(data.get("mgpu", 0)),
            int(data.get("cpu_milli", 0)),
            int(data.get("memory_mib", 0)),
        )
        uid = data["job_uid"]
        job = self.jobs.get(uid)
        if job is None:
            job = _Job(
                uid=uid,
                workspace=data.get("workspace"),
                quota=self._quota_for(data.get("quota"), data.get("workspace")),
                billing_mode=data.get("billing_mode", "public"),
                state="running",
                requested=dict(resources),
                submitted_at=at,
            )
            self.jobs[uid] = job
            self._contribute(job, +1)
            self.dirty_jobs.add(uid)
        else:
            self._enter(job, "running")
        idle = data.get("billing_mode") == "idle" or job.billing_mode == "idle"
        occ = _Occ(
            occupancy_id,
            uid,
            job.quota,
            idle,
            resources,
            True,
            _instant(data.get("started_at"), at),
        )
        self.occs[occupancy_id] = occ
        self.dirty_occs.add(occupancy_id)
        for flavor, qty in resources.items():
            self._bump(job.quota, flavor, _USED, qty)
            if idle:
                self._bump(job.quota, flavor, _IDLE, qty)

    def _tree(self, kind: str, data: Mapping[str, Any], at: datetime, position: int) -> None:
        if kind in ("QuotaCreated", "QuotaChanged"):
            spec = QuotaSpec.model_validate(data["spec"])
            before = self.created.get(spec.quota_id)
            self.specs[spec.quota_id] = spec
            self.created[spec.quota_id] = (before[0] if before else at, at, position)
        elif kind == "QuotaDeleted":
            self.specs.pop(data["quota_id"], None)
            self.created.pop(data["quota_id"], None)
        else:
            quota = data.get("quota")
            if quota:
                self.bindings[data["workspace"]] = (quota, at, position)
            else:
                self.bindings.pop(data["workspace"], None)
            self.bindings_changed = True
            return  # a binding changes only future jobs' quotas
        self.tree_changed = True
        self.whole_tree = True
        self.calculator = None

    # --- change points -----------------------------------------------------------

    def open_instant(self, at: datetime, position: int) -> None:
        """Events stamped ``at`` begin (``at`` is later than every earlier change point)."""
        self.watermark = at
        self.instant_position = position
        self.before = {}

    def flush(self) -> None:
        """Recompute the nodes x flavors touched since the last flush; record changes.

        The rows of an instant are a function of the state at the instant's end only, so
        page boundaries inside an instant (or a flush per event) give the same rows.
        """
        if not self.whole_tree and not self.dirty_flavors:
            return
        if self.calculator is None:
            self.calculator = UsageCalculator(self.specs)
        calc = self.calculator
        if self.whole_tree:
            universe: set[str] = set(self.own)
            for spec in self.specs.values():
                universe.update(spec.min, spec.max, spec.lend_limit)
            targets = universe | {f for (_, f) in self.current}
            rows = _rows(calc, self.own, targets & universe)
            for key, numbers in rows.items():
                self._set(key, numbers)
            for key in [k for k in self.current if k[1] in targets and k not in rows]:
                self._set(key, None)
            self.usage = {}  # rebuilt from ``own`` on the next change
        else:
            for flavor, quotas in self.dirty_flavors.items():
                self._settle(calc, flavor, quotas)
        self.dirty_flavors.clear()
        self.whole_tree = False

    def _settle(self, calc: UsageCalculator, flavor: str, quotas: set[str]) -> None:
        """Only the paths from the changed leaves to the root, and the lending among
        their children: :class:`FlavorUsage` keeps the flavor's numbers between changes."""
        own = self.own[flavor]
        index = calc.index
        usage = self.usage.get(flavor)
        if usage is None:  # first change of the flavor in this page (or tree): every node
            usage = self.usage[flavor] = FlavorUsage(calc, flavor)
            for quota, v in own.items():
                if quota in calc.leaves:
                    usage.set_leaf(index[quota], *v)
            usage.settle()
            nodes: Iterable[int] = range(len(calc.order))
            orphans = True
        else:
            orphans = False
            for quota in quotas:
                if quota in calc.leaves:
                    usage.set_leaf(index[quota], *own[quota])
                else:
                    orphans = True
            nodes = usage.settle()
        order = calc.order
        for i in nodes:
            self._set((order[i], flavor), usage.row(i))
        if orphans:  # usage reported under NO_QUOTA
            orphan = [0, 0, 0, 0]
            for quota, v in own.items():
                if quota not in calc.leaves:
                    orphan[0] += v[_USED]
                    orphan[1] += v[_QUEUED]
                    orphan[2] += v[_RUNNING]
                    orphan[3] += v[_QJOBS]
            key = (NO_QUOTA, flavor)
            if any(orphan):
                self._set(key, (0, 0, orphan[0], 0, 0, orphan[1], orphan[2], orphan[3], 0))
            elif key in self.current:
                self._set(key, None)

    def _set(self, key: tuple[str, str], numbers: tuple[Any, ...] | None) -> None:
        old = self.current.get(key)
        if old == numbers:
            return
        assert self.watermark is not None and self.instant_position is not None
        at, position = self.watermark, self.instant_position
        if key not in self.before:
            self.before[key] = (old, self.current_at.get(key))
        before, before_at = self.before[key]
        if numbers == before:  # back to where the instant started: no change point
            self.history.pop((key[0], key[1], at), None)
            self.usage_changed = True
            if before is None:
                self.current.pop(key, None)
                self.current_at.pop(key, None)
            else:
                assert before_at is not None
                self.current[key] = before
                self.current_at[key] = before_at
            return
        self.usage_changed = True
        if numbers is None:
            self.current.pop(key, None)
            self.current_at.pop(key, None)
            self.history[(key[0], key[1], at)] = (*(0,) * len(_NUMBERS), True, position)
        else:
            self.current[key] = numbers
            self.current_at[key] = (at, position)
            self.history[(key[0], key[1], at)] = (*numbers, False, position)


def _rows(
    calc: UsageCalculator,
    own: Mapping[str, Mapping[str, Sequence[int]]],
    flavors: Iterable[str],
) -> dict[tuple[str, str], tuple[int, ...]]:
    """Numbers (in ``_NUMBERS`` order) per (quota, flavor) for ``flavors``, every node
    (after a tree change; single changes go through :class:`FlavorUsage`)."""
    order, parent, index = calc.order, calc.parent, calc.index
    leaves = calc.leaves
    out: dict[tuple[str, str], tuple[int, ...]] = {}
    empty: dict[str, Sequence[int]] = {}
    for flavor in flavors:
        used: dict[str, int] = {}
        idle: dict[str, int] = {}
        counts = [[0, 0, 0] for _ in order]  # queued, running_jobs, queued_jobs
        orphan = [0, 0, 0, 0]  # used, queued, running_jobs, queued_jobs
        for quota, v in own.get(flavor, empty).items():
            if quota in leaves:
                if v[_USED]:
                    used[quota] = v[_USED]
                if v[_IDLE]:
                    idle[quota] = v[_IDLE]
                c = counts[index[quota]]
                c[0] += v[_QUEUED]
                c[1] += v[_RUNNING]
                c[2] += v[_QJOBS]
            else:
                orphan[0] += v[_USED]
                orphan[1] += v[_QUEUED]
                orphan[2] += v[_RUNNING]
                orphan[3] += v[_QJOBS]
        for i in range(len(order) - 1, 0, -1):  # children before parents: sum upwards
            p = parent[i]
            if p is not None:
                c, up = counts[i], counts[p]
                up[0] += c[0]
                up[1] += c[1]
                up[2] += c[2]
        for i, (lo, hi, u, b, lent, over) in enumerate(calc.numbers(flavor, used, idle)):
            c = counts[i]
            out[(order[i], flavor)] = (lo, hi, u, b, lent, c[0], c[1], c[2], over)
        if any(orphan):
            out[(NO_QUOTA, flavor)] = (0, 0, orphan[0], 0, 0, orphan[1], orphan[2], orphan[3], 0)
    return out


def _key(event: RecordedEvent) -> str | None:
    data = event.envelope.data
    uid = data.get("job_uid")
    return uid if isinstance(uid, str) else None


class QuotaProjection(Projection):
    """Folds quota, workspace, job and occupancy events into the quota tables."""

    name = "quotas"
    tables = (
        quota_usage_history,
        quota_usage,
        quota_own_usage,
        quota_occupancies,
        quota_jobs,
        quota_workspaces,
        quota_nodes,
        quota_projection_state,
    )
    event_types = _TREE_EVENTS | _JOB_EVENTS | _OCC_EVENTS

    def apply(self, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        uids = {uid for uid in map(_key, events) if uid is not None}
        fold, open_deleted = self._load(conn, uids)
        first = events[0].envelope.occurred_at if events else None
        if first is not None and fold.watermark is not None and first <= fold.watermark:
            self._reopen(conn, fold, open_deleted)  # the page continues the open instant
        for event in events:
            env = event.envelope
            at = env.occurred_at
            if fold.watermark is None or at > fold.watermark:
                fold.flush()
                fold.open_instant(at, event.position)
            fold.apply(env.type, env.data, fold.watermark, event.position)  # type: ignore[arg-type]
        fold.flush()
        self._save(conn, fold)

    @staticmethod
    def _reopen(conn: Connection, fold: _Fold, open_deleted: Sequence[Sequence[str]]) -> None:
        """Take the open instant's change points back into memory (they may still change).

        Its rows are the keys whose latest change point is the open instant (in
        ``quota_usage``) and the keys it deleted (kept in the state row), so no index on
        ``at`` is needed.
        """
        w, position = fold.watermark, fold.instant_position
        assert w is not None and position is not None
        keys = [k for k, (at, _) in fold.current_at.items() if at == w]
        for key in keys:
            fold.history[(*key, w)] = (*fold.current[key], False, position)
        for quota, flavor in open_deleted:
            keys.append((quota, flavor))
            fold.history[(quota, flavor, w)] = (*(0,) * len(_NUMBERS), True, position)
        if not keys:
            return
        for key in keys:
            fold.before[key] = (None, None)
        params = {"w": w, "q": [k[0] for k in keys], "f": [k[1] for k in keys]}
        cols = ", ".join(f'p."{n}"' for n in _NUMBERS)
        for row in conn.execute(
            text(
                f"SELECT k.quota, k.flavor, {cols}, p.deleted, p.at, p.position "
                "FROM unnest(CAST(:q AS text[]), CAST(:f AS text[])) AS k(quota, flavor) "
                "CROSS JOIN LATERAL (SELECT * FROM quota_usage_history p"
                "   WHERE p.quota = k.quota AND p.flavor = k.flavor AND p.at < :w"
                "   ORDER BY p.at DESC LIMIT 1) p"
            ),
            params,
        ):
            if not row.deleted:
                fold.before[(row[0], row[1])] = (tuple(row[2:11]), (row.at, row.position))
        conn.execute(
            text(
                "DELETE FROM quota_usage_history WHERE at = :w AND (quota, flavor) IN "
                "(SELECT * FROM unnest(CAST(:q AS text[]), CAST(:f AS text[])))"
            ),
            params,
        )

    @staticmethod
    def _load(conn: Connection, uids: set[str]) -> tuple[_Fold, list[list[str]]]:
        specs: dict[str, QuotaSpec] = {}
        created: dict[str, tuple[datetime, datetime, int]] = {}
        for row in conn.execute(select(quota_nodes)):
            specs[row.quota_id] = QuotaSpec.model_validate(row.spec)
            created[row.quota_id] = (row.created_at, row.changed_at, row.position)
        bindings = {
            row.workspace: (row.quota, row.bound_at, row.position)
            for row in conn.execute(select(quota_workspaces))
        }
        jobs = {
            row.job_uid: _Job(
                row.job_uid,
                row.workspace,
                row.quota,
                row.billing_mode,
                row.state,
                dict(row.requested),
                row.submitted_at,
            )
            for row in fetch_by_keys(conn, quota_jobs, "job_uid", uids)
        }
        occs = {
            row.occupancy_id: _Occ(
                row.occupancy_id,
                row.job_uid,
                row.quota,
                row.idle,
                dict(row.resources),
                row.open,
                row.started_at,
                row.ended_at,
            )
            for row in fetch_by_keys(conn, quota_occupancies, "job_uid", uids)
        }
        own: dict[str, dict[str, list[int]]] = {}
        for row in conn.execute(select(quota_own_usage)):
            own.setdefault(row.flavor, {})[row.quota] = [
                row.used,
                row.idle_used,
                row.queued,
                row.running_jobs,
                row.queued_jobs,
            ]
        current: dict[tuple[str, str], tuple[Any, ...]] = {}
        current_at: dict[tuple[str, str], tuple[datetime, int]] = {}
        for row in conn.execute(select(quota_usage)):
            current[(row.quota, row.flavor)] = tuple(getattr(row, n) for n in _NUMBERS)
            current_at[(row.quota, row.flavor)] = (row.at, row.position)
        state = conn.execute(
            select(
                quota_projection_state.c.watermark,
                quota_projection_state.c.instant_position,
                quota_projection_state.c.open_deleted,
            ).where(quota_projection_state.c.id == 1)
        ).first()
        fold = _Fold(
            specs,
            created,
            bindings,
            jobs,
            occs,
            own,
            current,
            current_at,
            state.watermark if state else None,
            state.instant_position if state else None,
            {},
            {},
        )
        fold.loaded_jobs = frozenset(jobs)
        fold.loaded_occs = frozenset(occs)
        return fold, list(state.open_deleted or []) if state else []

    @staticmethod
    def _save(conn: Connection, fold: _Fold) -> None:
        if fold.tree_changed:
            conn.execute(quota_nodes.delete())
            upsert_rows(
                conn,
                quota_nodes,
                [
                    (
                        q,
                        fold.specs[q].parent,
                        _dumps(fold.specs[q].model_dump(mode="json")),
                        *fold.created[q],
                    )
                    for q in sorted(fold.specs)
                ],
                key=["quota_id"],
            )
        if fold.bindings_changed:  # bindings are few: rewrite them all
            conn.execute(quota_workspaces.delete())
            upsert_rows(
                conn,
                quota_workspaces,
                [(ws, *fold.bindings[ws]) for ws in sorted(fold.bindings)],
                key=["workspace"],
            )
        # rows loaded at the page start may exist: upsert them; new ones: straight COPY
        jobs = sorted(fold.dirty_jobs)
        upsert_rows(
            conn,
            quota_jobs,
            [fold.jobs[u].row() for u in jobs if u in fold.loaded_jobs],
            key=["job_uid"],
        )
        copy_rows(
            conn,
            "quota_jobs",
            _JOB_COLUMNS,
            (fold.jobs[u].row() for u in jobs if u not in fold.loaded_jobs),
        )
        occs = sorted(fold.dirty_occs)
        upsert_rows(
            conn,
            quota_occupancies,
            [fold.occs[o].row() for o in occs if o in fold.loaded_occs],
            key=["occupancy_id"],
        )
        copy_rows(
            conn,
            "quota_occupancies",
            _OCC_COLUMNS,
            (fold.occs[o].row() for o in occs if o not in fold.loaded_occs),
        )
        upsert_rows(
            conn,
            quota_own_usage,
            [(q, f, *fold.own[f][q]) for q, f in sorted(fold.dirty_own)],
            key=["quota", "flavor"],
        )
        if fold.usage_changed:  # a few rows per node: rewrite them all
            conn.execute(quota_usage.delete())
            copy_rows(
                conn,
                "quota_usage",
                _USAGE_COLUMNS,
                (
                    (*k, fold.current_at[k][0], *fold.current[k], fold.current_at[k][1])
                    for k in sorted(fold.current_at)
                ),
            )
        # the open instant's rows were deleted by _reopen: no row of the page exists yet
        copy_rows(
            conn,
            "quota_usage_history",
            _HISTORY_COLUMNS,
            ((*k, *v) for k, v in sorted(fold.history.items())),
        )
        if fold.watermark is not None:
            conn.execute(
                text(
                    "INSERT INTO quota_projection_state "
                    "(id, watermark, instant_position, open_deleted) "
                    "VALUES (1, :w, :p, CAST(:d AS jsonb)) ON CONFLICT (id) DO UPDATE "
                    "SET watermark = EXCLUDED.watermark, "
                    "instant_position = EXCLUDED.instant_position, "
                    "open_deleted = EXCLUDED.open_deleted"
                ),
                {
                    "w": fold.watermark,
                    "p": fold.instant_position,
                    "d": _dumps(
                        sorted(
                            [q, f]
                            for (q, f, at), v in fold.history.items()
                            if at == fold.watermark and v[len(_NUMBERS)]
                        )
                    ),
                },
            )


# --- queries --------------------------------------------------------------------


def quota_tree(conn: Connection) -> QuotaTree:
    """The projected tree (specs and bindings), as ``quotas apply`` diffs against it."""
    specs = {
        row.quota_id: QuotaSpec.model_validate(row.spec)
        for row in conn.execute(select(quota_nodes.c.quota_id, quota_nodes.c.spec))
    }
    bindings = {
        row.workspace: row.quota
        for row in conn.execute(select(quota_workspaces.c.workspace, quota_workspaces.c.quota))
    }
    return QuotaTree(specs=specs, bindings=bindings)


@dataclass(frozen=True, slots=True)
class UsageRow:
    quota: str
    flavor: str
    at: datetime
    min: int
    max: int
    used: int
    borrowed: int
    lent: int
    queued: int
    running_jobs: int
    queued_jobs: int
    over_admitted: int

    def as_json(self) -> dict[str, Any]:
        return {
            "quota": self.quota,
            "flavor": self.flavor,
            "at": self.at,
            **{n: getattr(self, n) for n in _NUMBERS},
        }


def usage_at(
    conn: Connection, at: datetime | None = None, *, quota: str | None = None
) -> list[UsageRow]:
    """Usage per quota node x flavor at instant ``at`` (latest when None), tree order."""
    cols = ", ".join(f'"{n}"' for n in ("quota", "flavor", "at", *_NUMBERS))
    params: dict[str, Any] = {}
    where = ""
    if quota is not None:
        where = " WHERE quota = :quota"
        params["quota"] = quota
    if at is None:
        sql = f"SELECT {cols} FROM quota_usage{where}"
    else:
        # skip-scan the primary key for the (quota, flavor) keys, then one index probe
        # per key for its latest change point at or before ``at``
        params["at"] = at
        only = " AND h.quota = :quota" if quota is not None else ""
        picked = ", ".join(f'p."{n}"' for n in ("quota", "flavor", "at", *_NUMBERS))
        sql = (
            "WITH RECURSIVE k(quota, flavor) AS ("
            f" (SELECT quota, flavor FROM quota_usage_history h WHERE true{only}"
            "  ORDER BY quota, flavor LIMIT 1)"
            " UNION ALL"
            " SELECT n.quota, n.flavor FROM k CROSS JOIN LATERAL ("
            "  SELECT quota, flavor FROM quota_usage_history h"
            f"  WHERE (h.quota, h.flavor) > (k.quota, k.flavor){only}"
            "  ORDER BY quota, flavor LIMIT 1) n) "
            f"SELECT {picked} FROM k CROSS JOIN LATERAL ("
            f" SELECT {cols}, deleted FROM quota_usage_history h"
            " WHERE h.quota = k.quota AND h.flavor = k.flavor AND h.at <= :at"
            " ORDER BY h.at DESC LIMIT 1) p WHERE NOT p.deleted"
        )
    rows = [UsageRow(*row) for row in conn.execute(text(sql), params)]
    specs = quota_tree(conn).specs
    if at is not None:
        rows = _exact_at(conn, at, _specs_at(conn, at), rows, quota)
    rank = {q: i for i, q in enumerate(topological_order(specs))}
    rows.sort(key=lambda r: (rank.get(r.quota, len(rank)), r.quota, r.flavor))
    return rows


def _specs_at(conn: Connection, at: datetime) -> dict[str, QuotaSpec]:
    """The quota tree in force at ``at``: the tree events up to it, in cluster-time order."""
    specs: dict[str, QuotaSpec] = {}
    for type_, data in conn.execute(
        text(
            "SELECT type, data FROM events WHERE type IN "
            "('QuotaCreated', 'QuotaChanged', 'QuotaDeleted') AND occurred_at <= :at "
            "ORDER BY occurred_at, position"
        ),
        {"at": at},
    ).all():
        if type_ == "QuotaDeleted":
            specs.pop(data["quota_id"], None)
        else:
            spec = QuotaSpec.model_validate(data["spec"])
            specs[spec.quota_id] = spec
    return specs


def _exact_at(
    conn: Connection,
    at: datetime,
    specs: Mapping[str, QuotaSpec],
    rows: list[UsageRow],
    quota: str | None,
) -> list[UsageRow]:
    """Usage numbers at ``at`` from the pods' own intervals, not from the change points.

    The store's position order is cluster-time order only per job (Kafka keeps order per
    key), so the change-point history stamps many events late (docs/quotas.md). What was
    occupied at an instant does not depend on arrival order: sum the intervals open at
    ``at`` per leaf, then derive borrowed, lent and over-admission from the tree. Queue
    figures (``queued``, job counts) still come from the change points.
    """
    used: dict[str, dict[str, int]] = {}
    idle: dict[str, dict[str, int]] = {}
    leaves = {q for q in specs if not any(s.parent == q for s in specs.values())}
    for occ_quota, is_idle, resources in conn.execute(
        text(
            "SELECT quota, idle, resources FROM quota_occupancies "
            "WHERE started_at <= :at AND (ended_at IS NULL OR ended_at > :at)"
        ),
        {"at": at},
    ).all():
        target = occ_quota if occ_quota in leaves else NO_QUOTA
        for key, qty in resources.items():
            per = used.setdefault(target, {})
            per[key] = per.get(key, 0) + int(qty)
            if is_idle and target != NO_QUOTA:
                per_idle = idle.setdefault(target, {})
                per_idle[key] = per_idle.get(key, 0) + int(qty)
    orphan = used.pop(NO_QUOTA, {})
    exact = compute_usage(specs, used, idle) if specs else {}
    by_key = {(r.quota, r.flavor): r for r in rows}
    out: list[UsageRow] = []
    keys = set(by_key) | set(exact) | {(NO_QUOTA, f) for f in orphan}
    for key in sorted(keys):
        if quota is not None and key[0] != quota:
            continue
        base = by_key.get(key)
        queue = (base.queued, base.running_jobs, base.queued_jobs) if base else (0, 0, 0)
        stamp = base.at if base else at
        if key[0] == NO_QUOTA:
            qty = orphan.get(key[1], 0)
            if qty == 0 and base is None:
                continue
            out.append(UsageRow(key[0], key[1], stamp, 0, 0, qty, 0, 0, *queue, 0))
            continue
        node = exact.get(key)
        if node is None:
            if base is not None:
                out.append(base)
            continue
        out.append(
            UsageRow(
                key[0],
                key[1],
                stamp,
                node.min,
                node.max,
                node.used,
                node.borrowed,
                node.lent,
                *queue,
                node.over_admitted,
            )
        )
    return out
