"""The quota fold: a page's job, pod and tree events as signed changes of raw usage per
leaf quota, flavor and instant (no IO; :mod:`projections.quotas.projection` loads its
state and saves what it folded). Each job's facts are kept whatever order they arrived
in, and its queued / running timeline is a function of them, so a page writes its
timeline after minus before and arrival order never matters (rules: the projection's
docstring and ``docs/quotas.md``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import orjson

from ledger.bounds import EARLIEST, LATEST, check_instant
from ledger.events import QuotaSpec
from ledger.quotas import NO_QUOTA
from projections.quotas.buckets import EPOCH

__all__ = [
    "END_EVENTS",
    "JOB_EVENTS",
    "OCC_EVENTS",
    "TREE_EVENTS",
    "Fold",
    "Job",
    "Occupancy",
    "add_sums_to",
    "dumps",
    "spec_json",
]

END_EVENTS = frozenset({"JobSucceeded", "JobFailed", "JobStopped", "JobDeleted"})
# a job's other lifecycle events (queued, admitted, started, preempted ...) change nothing
# here: its queued and running spans are its submission, its pods' intervals and its end
JOB_EVENTS = frozenset({"JobSubmitted"}) | END_EVENTS
TREE_EVENTS = frozenset({"QuotaCreated", "QuotaChanged", "QuotaDeleted", "WorkspaceBound"})
OCC_EVENTS = frozenset({"OccupancyStarted", "OccupancyEnded"})

# raw usage columns (RAW order)
_USED, _IDLE, _QUEUED, _RUNNING, _QJOBS = range(5)


def dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def spec_json(spec: QuotaSpec) -> str:
    """A quota spec as the tables store it (sorted keys)."""
    return dumps(spec.model_dump(mode="json"))


def _zeros() -> list[int]:
    return [0, 0, 0, 0, 0]


_MICRO = timedelta(microseconds=1)
# a job's state on its timeline
_NONE, _QUEUED_STATE, _RUNNING_STATE = 0, 1, 2


def _micros(at: datetime) -> int:
    """Microseconds from the Unix epoch (the job rows' interval unit: exact, JSON-friendly)."""
    return (at - EPOCH) // _MICRO


def _from_micros(value: int) -> datetime:
    return EPOCH + timedelta(microseconds=value)


@dataclass
class Job:
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
            dumps(self.requested),
            self.submitted_at,
            self.submitted,
            self.ended_at,
            dumps(self.occupied),
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
class Occupancy:
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
            dumps(self.resources),
            self.open,
            self.started_at,
            self.ended_at,
        )


def _instant(value: Any, default: datetime) -> datetime:
    """An event's own timestamp field (ISO text in stored payloads), else ``default``.

    Bounded where it enters the fold (:func:`ledger.bounds.check_instant`): an event stored
    before the facts' bounds existed may hold any instant, and one near ``datetime``'s end
    overflowed the hour arithmetic of this fold, its rollups and its reads, depending on
    the page it came in. Refused here (``OutOfBounds``), on the event alone, the projector
    skips it and dead-letters it the same way in any pages (:mod:`projections.steps`)."""
    if isinstance(value, datetime):
        instant = value
    elif isinstance(value, str):
        instant = datetime.fromisoformat(value.replace("Z", "+00:00"))
    else:
        return default
    if not EARLIEST <= instant < LATEST:
        check_instant(instant, "occupancy instant")
    return instant


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
class Fold:
    """One page's working state: the rows it took out of the tables, and what it changes.

    ``jobs`` and ``occs`` hold every row taken out plus those the page creates; all of
    them go back when the page is saved.
    """

    specs: dict[str, QuotaSpec]
    created: dict[str, tuple[datetime, datetime, int]]  # quota -> created_at, changed_at, pos
    bindings: dict[str, tuple[str, datetime, int]]
    jobs: dict[str, Job]
    occs: dict[str, Occupancy]
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

    def _touch(self, job: Job, position: int) -> None:
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
    ) -> Job:
        job = Job(
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
        if kind in TREE_EVENTS:
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
        elif kind in END_EVENTS:
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
        occ = Occupancy(occupancy_id, job.uid, job.quota, idle, resources, True, started)
        self.occs[occupancy_id] = occ
        job.occupied[occupancy_id] = [_micros(started), None]
        self._occupy(occ, +1, occ.started_at, position)

    def _occupy(self, occ: Occupancy, sign: int, at: datetime, position: int) -> None:
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
            self.tree_rows.append((at, position, spec.quota_id, spec_json(spec)))
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


def add_sums_to(sums: dict[Any, list[Any]], key: Any, values: list[Any], at: datetime) -> None:
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
