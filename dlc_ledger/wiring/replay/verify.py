"""What a replay did and found: its summary, and the store checked against the trace.

The trace says how many occupancies must start (one per scheduled pod) and end (one per
deleted scheduled pod); the store says how many the watcher's events recorded. An open-loop
replay is also checked to the second (:func:`check_usage`): per workspace, the pods that
occupied resources and their seconds, mGPU-, CPU- and memory-seconds (an occupancy the trace
leaves open counted to the trace's end) equal the trace's; and per service (a DLRM app: a
Deployment whose replicas are its instances), one service, whose replicas' occupied seconds
and desired replica-seconds (its creation and scales, to the trace's end) equal its
instances' occupancy and lifetimes. A replay is ``ok`` when the store has at least as many
occupancies as the trace and nothing checked differs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, select

from dlc_ledger.wiring.replay.closed_loop import ClosedLoopFigures
from kubesim.driver import pod_names
from kubesim.traces import Trace
from ledger.events import WATCHER_SOURCE_PREFIX
from ledger.store.postgres import PostgresEventStore
from ledger.store.schema import dead_letters
from ledger.store.schema import events as events_table

__all__ = [
    "ReplaySummary",
    "StoreCounts",
    "TraceFigures",
    "Usage",
    "check_store",
    "check_usage",
    "trace_usage",
]


@dataclass
class ReplaySummary:
    """What a replay did and found; ``ok`` when the store matches the trace."""

    trace: str
    cluster: str
    topic: str
    instances: int
    nodes: int
    expected_started: int
    expected_ended: int
    occupancies_started: int = 0
    occupancies_ended: int = 0
    events_stored: int = 0  # added by this run
    events_total: int = 0
    published: int = 0
    ingested: int = 0
    dead_letters: int = 0
    projected: bool = False
    wall_seconds: float = 0.0
    virtual_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    closed_loop: ClosedLoopFigures | None = None
    #: a closed loop stopped before its jobs ended (``--until``): the trace's counts of
    #: started and ended pods do not apply
    stopped: bool = False
    #: the services (Deployments) the trace's rows are replicas of, and how many the store has
    expected_services: int = 0
    services: int = 0
    #: the trace's rows that are a service's replicas (the others are jobs)
    replicas: int = 0
    #: workspaces whose usage was checked against the trace (0: not checked, a closed loop)
    workspaces_checked: int = 0
    #: what differs from the trace (per workspace usage, per service replicas); empty: exact
    mismatches: list[str] = field(default_factory=list)

    @staticmethod
    def expected(trace: Trace, cluster: str, topic: str) -> ReplaySummary:
        """A summary with what ``trace`` must leave in the store, nothing found yet (a
        service's rows are its replicas, open loop and closed loop alike)."""
        scheduled = [i for i in trace.instances if i.scheduled is not None]
        replicas = [i for i in trace.instances if i.service is not None]
        services = {(i.namespace, i.service) for i in replicas}
        return ReplaySummary(
            trace=trace.name,
            cluster=cluster,
            topic=topic,
            instances=len(trace.instances),
            nodes=len(trace.nodes),
            expected_started=len(scheduled),
            expected_ended=sum(1 for i in scheduled if i.deleted is not None),
            expected_services=len(services),
            replicas=len(replicas),
        )

    @property
    def ok(self) -> bool:
        return not self.mismatches and (
            self.stopped
            or (
                self.occupancies_started >= self.expected_started
                and self.occupancies_ended >= self.expected_ended
            )
        )

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}

    def lines(self) -> list[str]:
        return [
            f"replay {self.trace}: {self._rows()} on {self.nodes} nodes,"
            f" {self.virtual_seconds:,.0f} virtual s in {self.wall_seconds:.1f} s wall",
            f"events stored: {self.events_stored} new ({self.events_total} in the store),"
            f" {self.published} published, {self.ingested} ingested",
            f"occupancies: {self.occupancies_started} started, {self.occupancies_ended} ended"
            + (
                " (stopped before the jobs ended)"
                if self.stopped
                else f" (trace: {self.expected_started} started, {self.expected_ended} ended)"
            ),
            *self._usage_lines(),
            f"dead letters: {self.dead_letters}",
            *(self.closed_loop.lines() if self.closed_loop else []),
            *self.notes,
        ]

    def _rows(self) -> str:
        jobs = self.instances - self.replicas
        parts = [f"{jobs} jobs"] if jobs or not self.replicas else []
        if self.replicas:
            parts.append(f"{self.replicas} replicas of {self.expected_services} services")
        return " and ".join(parts)

    def _usage_lines(self) -> list[str]:
        if not self.workspaces_checked:
            return []
        lines = [
            f"usage: {self.workspaces_checked} workspaces checked against the trace to the"
            + (" second" if not self.mismatches else f" second, {len(self.mismatches)} differ")
        ]
        if self.expected_services:
            lines.append(
                f"services: {self.services} of {self.expected_services}, replica-seconds"
                " checked against the trace's instances"
            )
        return lines + [f"  differs: {m}" for m in self.mismatches[:10]]


def _count(store: PostgresEventStore, query: Any) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(query).scalar() or 0)


@dataclass(frozen=True)
class StoreCounts:
    """Events and dead letters in the store, read before a replay to tell what it added."""

    events: int
    dead_letters: int

    @staticmethod
    def read(store: PostgresEventStore) -> StoreCounts:
        return StoreCounts(
            events=_count(store, select(func.count()).select_from(events_table)),
            dead_letters=_count(store, select(func.count()).select_from(dead_letters)),
        )


def check_store(summary: ReplaySummary, store: PostgresEventStore, before: StoreCounts) -> None:
    """Fill ``summary`` with what the store holds from this replay's cluster."""
    source = f"{WATCHER_SOURCE_PREFIX}{summary.cluster}"
    with store.engine.connect() as conn:
        counts: dict[str, int] = dict(
            conn.execute(
                select(events_table.c.type, func.count())
                .where(
                    events_table.c.source == source,
                    events_table.c.type.in_(["OccupancyStarted", "OccupancyEnded"]),
                )
                .group_by(events_table.c.type)
            ).all()
        )
    summary.occupancies_started = int(counts.get("OccupancyStarted", 0))
    summary.occupancies_ended = int(counts.get("OccupancyEnded", 0))
    after = StoreCounts.read(store)
    summary.events_total = after.events
    summary.events_stored = after.events - before.events
    summary.dead_letters = after.dead_letters - before.dead_letters


@dataclass(frozen=True)
class Usage:
    """Occupancy of one workspace or service: pods, seconds, and resource-seconds."""

    pods: int = 0
    seconds: int = 0
    mgpu_seconds: int = 0
    cpu_milli_seconds: int = 0
    memory_mib_seconds: int = 0

    def plus(self, seconds: int, mgpu: int, cpu_milli: int, memory_mib: int) -> Usage:
        return Usage(
            self.pods + 1,
            self.seconds + seconds,
            self.mgpu_seconds + mgpu * seconds,
            self.cpu_milli_seconds + cpu_milli * seconds,
            self.memory_mib_seconds + memory_mib * seconds,
        )


@dataclass(frozen=True)
class TraceFigures:
    workspaces: dict[str, Usage]
    #: (namespace, service) -> (its replicas' occupancy, its desired replica-seconds)
    services: dict[tuple[str, str], tuple[Usage, int]]


def trace_usage(trace: Trace, until: int | None = None) -> TraceFigures:
    """What the trace says: per workspace the occupancy of its scheduled rows, per service
    its replicas' occupancy and its rows' lifetimes (created to deleted), open rows to the
    trace's end; ``until`` (trace seconds): only what happened before it (occupancies
    started before it, counted up to it; lifetimes up to it)."""
    workspaces: dict[str, Usage] = defaultdict(Usage)
    occupied: dict[tuple[str, str], Usage] = defaultdict(Usage)
    desired: dict[tuple[str, str], int] = defaultdict(int)
    for inst in trace.instances:
        end = inst.deleted if inst.deleted is not None else trace.end
        if until is not None:
            if inst.created >= until:
                continue
            end = min(end, until)
        if inst.service is not None:
            key = (inst.namespace, inst.service)
            desired[key] += end - inst.created
            occupied.setdefault(key, Usage())
        if inst.scheduled is None or (until is not None and inst.scheduled >= until):
            continue
        figures = (end - inst.scheduled, inst.gpu_milli, inst.cpu_milli, inst.memory_mib)
        workspaces[inst.workspace] = workspaces[inst.workspace].plus(*figures)
        if inst.service is not None:
            key = (inst.namespace, inst.service)
            occupied[key] = occupied[key].plus(*figures)
    return TraceFigures(dict(workspaces), {k: (occupied[k], desired[k]) for k in occupied})


def _at(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


def check_usage(
    summary: ReplaySummary, store: PostgresEventStore, trace: Trace, until: int | None = None
) -> None:
    """Compare the store with the trace to the second (see the module docstring); what
    differs goes to ``summary.mismatches``. Only the pods the trace names count, so an
    earlier replay of another slice into the same database changes nothing. ``until``
    (trace seconds): up to that instant only, both sides cut there (a history whose rows
    a dispatcher may preempt after it)."""
    source = f"{WATCHER_SOURCE_PREFIX}{summary.cluster}"
    names = set(pod_names(trace).values())
    end = trace.epoch.timestamp() + (trace.end if until is None else min(trace.end, until))
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(
                events_table.c.type,
                events_table.c.occurred_at,
                events_table.c.data,
            )
            .where(
                events_table.c.source == source,
                events_table.c.type.in_(
                    [
                        "OccupancyStarted",
                        "OccupancyEnded",
                        "WorkloadCreated",
                        "WorkloadScaled",
                        "WorkloadDeleted",
                    ]
                ),
            )
            .order_by(events_table.c.position)
        ).all()
    started: dict[str, dict[str, Any]] = {}
    ended: dict[str, float] = {}
    services: dict[tuple[str, str], set[str]] = defaultdict(set)
    changes: dict[str, list[tuple[float, int]]] = defaultdict(list)
    cut = until is not None  # what starts or changes at or after ``end`` is not compared
    for type_, occurred_at, data in rows:
        if cut and type_ != "OccupancyEnded":
            at = data["started_at"] if type_ == "OccupancyStarted" else occurred_at
            if _at(at).timestamp() >= end:
                continue
        if type_ == "OccupancyStarted" and data["pod_name"] in names:
            started[data["occupancy_id"]] = data
        elif type_ == "OccupancyEnded":
            ended[data["occupancy_id"]] = _at(data["ended_at"]).timestamp()
        elif type_ == "WorkloadCreated":
            services[(data["namespace"], data["name"])].add(data["job_uid"])
            changes[data["job_uid"]].append((occurred_at.timestamp(), data["replicas"]))
        elif type_ == "WorkloadScaled":
            changes[data["job_uid"]].append((occurred_at.timestamp(), data["to_replicas"]))
        elif type_ == "WorkloadDeleted":
            changes[data["job_uid"]].append((occurred_at.timestamp(), 0))
    workspaces: dict[str, Usage] = defaultdict(Usage)
    by_job: dict[str, Usage] = defaultdict(Usage)
    for occupancy_id, data in started.items():
        since = _at(data["started_at"]).timestamp()
        stop = ended.get(occupancy_id, end)
        seconds = round((min(stop, end) if cut else stop) - since)
        figures = (seconds, data["mgpu"], data["cpu_milli"], data["memory_mib"])
        workspaces[data["workspace"]] = workspaces[data["workspace"]].plus(*figures)
        by_job[data["job_uid"]] = by_job[data["job_uid"]].plus(*figures)
    expected = trace_usage(trace, until)
    wrong: list[str] = []
    for workspace in sorted(expected.workspaces.keys() | workspaces.keys()):
        want, got = expected.workspaces.get(workspace, Usage()), workspaces.get(workspace, Usage())
        if want != got:
            wrong.append(f"workspace {workspace}: store {got}, trace {want}")
    found = 0
    for (namespace, name), (occupied, replica_seconds) in sorted(expected.services.items()):
        uids = services.get((namespace, name), set())
        if len(uids) != 1:
            wrong.append(f"service {namespace}/{name}: {len(uids)} in the store, not 1")
            continue
        found += 1
        (uid,) = uids
        got_occupied = by_job.get(uid, Usage())
        if got_occupied != occupied:
            wrong.append(
                f"service {namespace}/{name} replicas: store {got_occupied}, trace {occupied}"
            )
        got_desired = _replica_seconds(sorted(changes[uid], key=lambda c: c[0]), end)
        if got_desired != replica_seconds:
            wrong.append(
                f"service {namespace}/{name}: {got_desired} desired replica-seconds in the store,"
                f" {replica_seconds} in the trace"
            )
    summary.services = found
    summary.workspaces_checked = len(expected.workspaces)
    summary.mismatches = wrong


def _replica_seconds(changes: list[tuple[float, int]], end: float) -> int:
    """The desired replicas integrated over time, from the creation to ``end``."""
    total = 0.0
    for (at, replicas), (later, _) in zip(changes, [*changes[1:], (end, 0)], strict=True):
        total += replicas * (max(later, at) - at)
    return round(total)
