"""A dispatcher cycle's input, read from projected state: the quota tree, the jobs that
occupy or wait, and the decisions already taken but not yet seen acted on.

From ``job_state`` (projections/jobs) and the quota tree (projections/quota_reads):

- *pending*: a job ``Queuing`` (created suspended) or ``Preempted`` (suspended again),
  not deleted and holding no pod; queued at the instant it entered that status (a
  preempted job queues anew, as Kueue requeues an evicted workload);
- *admitted*: a job ``Admitted``, ``Running`` or ``Restarting``, or any job still holding
  a pod (a victim releasing, a job stopping); admitted at the start of its current run
  of admitted/running statuses;
- a job whose quota is unknown or not a leaf of the tree is neither (``unplaced``).

Services and notebooks (``job_state`` rows whose framework is ``service`` or ``notebook``,
docs/workloads.md) are read replica by replica (:func:`ledger.dispatch.replica_unit`):
``<uid>#0`` … are the replicas holding pods (a replica's pods: ``per_replica``), the
running units; the desired replicas beyond them are pending units, queued since the
workload's latest scale (or creation), their pending episode (``attempt``) the workload's
scales so far, so a scale is a new episode; one replica's resources each. A deleted or
ended workload has running units only while it holds pods. A notebook unit whose latest
decision of its episode refused it is neither pending nor admitted (it waits for a new
scale). A workload may name an inner quota (its own leaf in the core). At a past instant
(``as_at``) workloads are left out: their replica counts have no history here. A service
whose ``WorkloadCreated`` asked for ``spillover: public`` has spillover units
(``Incoming.spillover``); a unit whose latest decision admitted it on public resources
(an ``admit`` with reason ``Spillover``), held or being released, runs outside the quota:
it is left out of ``admitted`` (it counts against no quota and is nobody's victim) and
named in ``DispatchView.spilled``.

The job's quota is the one its JobSubmitted named, else its workspace's binding; its
resources are its replicas summed, per key of the tree (``gpu/<model>`` counts as the
leaf names it, else ``gpu/any``: :func:`ledger.quotas.counted_flavor`; cpu in
milli-cores, memory in MiB), keys the tree never names left out (nothing limits them).

Decisions (``dispatch_decisions``, plus a caller's own not yet projected): an admission
of the job's current episode whose job still waits counts the job as admitted (it holds
its place while being resumed); a preemptor whose victims still occupy waits
(``preempting``); a BestEffortFIFO head parked in its latest pending decision stays
parked.

At a past instant (``queue show --at``, ``jobs why --at``) the same rules apply to the jobs
as they stood then (:mod:`projections.jobs.as_at`: status, since and preemptions from the
status history; holding a pod by the occupancy read model's intervals).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ARRAY, Connection, Text, any_, bindparam, func, or_, select

from ledger.dispatch import Admitted, CycleInput, Incoming, WorkloadClass, replica_unit
from ledger.dispatch.trees import DispatchConfig, dispatch_config
from ledger.dispatch.workloads import SPILLOVER_REASON
from ledger.events import QuotaSpec
from ledger.quotas import QuotaTree, counted_flavor
from ledger.store.schema import events
from ledger.subscriptions import Subscription, expired_quotas
from projections.dispatch.decisions import dispatch_decisions
from projections.inventory import jobs_holding_at
from projections.jobs import existed_by, job_state, parse_time, preemptions_at, status_at
from projections.quotas import quota_tree, specs_at

__all__ = [
    "ADMITTED_STATUSES",
    "PENDING_STATUSES",
    "DecisionRecord",
    "DispatchJob",
    "DispatchView",
    "dispatch_input",
    "job_resources",
    "read_decisions",
    "read_dispatch",
]

PENDING_STATUSES = frozenset({"Queuing", "Preempted"})
ADMITTED_STATUSES = frozenset({"Admitted", "Running", "Restarting"})


@dataclass(frozen=True)
class DecisionRecord:
    """The latest decision about one job (a row of ``dispatch_decisions``)."""

    job_uid: str
    attempt: int
    outcome: str  # admit | pending | preempt | victim
    reason: str | None = None
    quota: str | None = None
    preemptor: str | None = None
    victims: tuple[str, ...] = ()
    pending_count: int = 0
    position: int = 0
    decided_at: datetime | None = None


@dataclass(frozen=True)
class DispatchJob:
    """A job the dispatcher may act on: its identity on the cluster and its state."""

    uid: str
    name: str
    namespace: str
    kind: str
    status: str
    #: the pending episode: the job's preemptions so far
    attempt: int
    quota: str | None
    workspace: str
    billing_mode: str
    priority: int
    resources: Mapping[str, float]
    since: datetime
    occupying: bool
    pending: bool
    #: ``job`` (training), or a service's or notebook's replica (``uid`` its unit)
    workload: WorkloadClass = "job"
    #: the service or notebook a replica unit is of (its job uid); the job's own uid else
    workload_uid: str = ""
    #: a replica's pods (a LeaderWorkerSet's group), for a unit
    per_replica: int = 1
    #: a service's replica that may run on public resources beyond its quota
    spillover: bool = False
    #: the replicas its workload asks for (none once deleted or scaled to none), for a unit
    desired: int = 0


@dataclass(frozen=True)
class DispatchView:
    """Everything one cycle reads: the core's input and what the loop acts on."""

    cycle: CycleInput
    config: DispatchConfig
    tree: QuotaTree
    jobs: Mapping[str, DispatchJob] = field(default_factory=dict)
    decisions: Mapping[str, DecisionRecord] = field(default_factory=dict)
    #: admissions decided for the jobs' current episode whose jobs still wait
    admitting: frozenset[str] = frozenset()
    #: victims decided whose jobs still occupy: victim -> preemptor
    stopping: Mapping[str, str] = field(default_factory=dict)
    #: jobs with no leaf quota: never decided
    unplaced: tuple[str, ...] = ()
    #: notebook units refused at start, still wanted by their workload: unit -> reason
    refused: Mapping[str, str] = field(default_factory=dict)
    #: service replicas admitted on public resources (spillover), held or being released:
    #: outside the quota, left out of ``cycle.admitted``
    spilled: frozenset[str] = frozenset()


def dispatch_input(
    conn: Connection,
    now: datetime,
    *,
    blocked_workspaces: frozenset[str] = frozenset(),
) -> CycleInput:
    """The input of a cycle at ``now`` from projected state (see the module docstring)."""
    return read_dispatch(conn, now, blocked_workspaces=blocked_workspaces).cycle


def read_decisions(
    conn: Connection, jobs: Collection[str] | None = None
) -> dict[str, DecisionRecord]:
    """The latest decision per job (of ``jobs`` only, unless None)."""
    t = dispatch_decisions
    query = select(t)
    if jobs is not None:  # one array parameter, however many jobs
        uids = bindparam("uids", sorted(jobs), type_=ARRAY(Text))
        query = query.where(t.c.job_uid == any_(uids))
    return {
        row.job_uid: DecisionRecord(
            row.job_uid,
            row.attempt,
            row.outcome,
            row.reason,
            row.quota,
            row.preemptor,
            tuple(row.victims),
            row.pending_count,
            row.position,
            row.decided_at,
        )
        for row in conn.execute(query)
    }


def job_resources(
    replicas: list[dict[str, Any]], spec: QuotaSpec | None, keys: frozenset[str]
) -> dict[str, float]:
    """A job's request summed over its replicas, per key of the tree that counts it."""
    out: dict[str, float] = {}
    for r in replicas:
        count = int(r.get("count", 1))
        parts = (
            (counted_flavor(spec, str(r.get("flavor", "gpu/any"))), r.get("mgpu", 0)),
            ("cpu", r.get("cpu_milli", 0)),
            ("memory", r.get("memory_mib", 0)),
        )
        for key, qty in parts:
            if key in keys and qty:
                out[key] = out.get(key, 0) + count * int(qty)
    return out


def _tree_keys(tree: QuotaTree) -> frozenset[str]:
    return frozenset(
        key
        for spec in tree.specs.values()
        for amounts in (spec.min, spec.max, spec.lend_limit)
        for key in amounts
    )


def _admitted_since(transitions: list[list[str]], fallback: datetime) -> datetime:
    """The start of the job's current run of admitted/running statuses."""
    since: str | None = None
    for status, at in reversed(transitions):
        if status not in ADMITTED_STATUSES:
            break
        since = at
    return datetime.fromisoformat(since) if since is not None else fallback


_JOB_COLUMNS = (
    job_state.c.job_uid,
    job_state.c.name,
    job_state.c.namespace,
    job_state.c.kind,
    job_state.c.status,
    job_state.c.status_since,
    job_state.c.preemptions,
    job_state.c.quota,
    job_state.c.workspace,
    job_state.c.billing_mode,
    job_state.c.priority,
    job_state.c.replicas,
    job_state.c.open_occupancies,
    job_state.c.deleted_at,
    job_state.c.transitions,
    job_state.c.framework,
)

#: job_state frameworks of services and notebooks (ledger.events.WORKLOAD_KINDS)
_WORKLOADS = frozenset({"service", "notebook"})


@dataclass(frozen=True)
class _State:
    """A job's time-dependent state, now or as it stood at an instant."""

    status: str
    since: datetime
    #: the pending episode: the job's preemptions by then
    attempt: int
    occupying: bool
    pending: bool
    transitions: list[list[str]]


def _state_now(row: Any) -> _State:
    occupying = bool(row.open_occupancies) or row.status in ADMITTED_STATUSES
    pending = row.status in PENDING_STATUSES and not row.open_occupancies and row.deleted_at is None
    return _State(
        row.status,
        row.status_since,
        int(row.preemptions),
        occupying,
        pending,
        list(row.transitions or ()),
    )


def _rows_now(conn: Connection) -> list[tuple[Any, _State]]:
    s = job_state.c
    rows = conn.execute(
        select(*_JOB_COLUMNS).where(
            or_(
                s.status.in_(sorted(PENDING_STATUSES | ADMITTED_STATUSES)),
                s.open_occupancies != [],
                # a live service or notebook: it may want replicas it does not hold
                (s.framework.in_(sorted(_WORKLOADS)) & s.deleted_at.is_(None)),
            )
        )
    )
    return [(row, _state_now(row)) for row in rows]


@dataclass(frozen=True)
class _Scales:
    """A workload's scales so far and the instant of its latest scale (or creation)."""

    count: int
    latest: datetime
    #: its ``WorkloadCreated`` asked for ``spillover: public``
    spillover: bool = False


def _scales(conn: Connection, uids: list[str]) -> dict[str, _Scales]:
    """Per workload uid: how many ``WorkloadScaled`` it has had, the latest instant it
    was created or scaled, and whether it spills over (its own stream ``job/<uid>``, one
    grouped read)."""
    if not uids:
        return {}
    streams = bindparam("streams", [f"job/{u}" for u in uids], type_=ARRAY(Text))
    query = (
        select(
            events.c.stream,
            func.count().filter(events.c.type == "WorkloadScaled"),
            func.max(events.c.occurred_at),
            func.bool_or(
                (events.c.type == "WorkloadCreated")
                & (events.c.data["spillover"].astext == "public")
            ),
        )
        .where(
            events.c.stream == any_(streams),
            events.c.type.in_(("WorkloadCreated", "WorkloadScaled")),
        )
        .group_by(events.c.stream)
    )
    return {row[0][4:]: _Scales(int(row[1]), row[2], bool(row[3])) for row in conn.execute(query)}


def _units(
    row: Any,
    state: _State,
    quota: str | None,
    spec: QuotaSpec | None,
    keys: frozenset[str],
    scales: _Scales | None,
) -> list[DispatchJob]:
    """A service's or notebook's replicas as units of admission (module docstring)."""
    specs = list(row.replicas or ())
    if not specs:
        return []
    replica = dict(specs[0])
    per_replica = max(1, int(replica.get("per_replica", 1)))
    desired = int(replica.get("replicas", 0))
    holding = -(-len(row.open_occupancies or ()) // per_replica)
    alive = row.deleted_at is None and row.status not in ("Stopping", "Stopped")
    wanted = max(holding, desired if alive else 0)
    resources = job_resources([{**replica, "count": per_replica}], spec, keys)
    kind: WorkloadClass = "notebook" if row.framework == "notebook" else "service"
    queued = scales.latest if scales is not None else state.since
    out: list[DispatchJob] = []
    for i in range(wanted):
        running = i < holding
        out.append(
            DispatchJob(
                uid=replica_unit(row.job_uid, i),
                name=row.name or row.job_uid,
                namespace=row.namespace or "default",
                kind=row.kind or "Deployment",
                status="Running" if running else "Queuing",
                attempt=scales.count if scales is not None else 0,
                quota=quota,
                workspace=row.workspace or "",
                billing_mode=row.billing_mode or "public",
                priority=int(row.priority or 0),
                resources=resources,
                since=state.since if running else queued,
                occupying=running,
                pending=not running,
                workload=kind,
                workload_uid=row.job_uid,
                per_replica=per_replica,
                spillover=kind == "service" and scales is not None and scales.spillover,
                desired=desired if alive else 0,
            )
        )
    return out


def _rows_at(conn: Connection, at: datetime) -> list[tuple[Any, _State]]:
    """The jobs as they stood at ``at`` (:mod:`projections.jobs.as_at`): their status then
    from their status history, holding a pod then by the occupancy read model's
    intervals, deleted then only if deleted by then."""
    holding = jobs_holding_at(conn, at)
    s = job_state.c
    # a job ended by then takes no part, unless it still held a pod (a stopping job)
    alive = or_(s.ended_at.is_(None), s.ended_at > at)
    if holding:
        alive = or_(alive, s.job_uid == any_(bindparam("holding", sorted(holding), ARRAY(Text))))
    out: list[tuple[Any, _State]] = []
    for row in conn.execute(select(*_JOB_COLUMNS).where(existed_by(at), alive)):
        transitions = [list(t) for t in row.transitions or () if parse_time(t[1]) <= at]
        then = status_at(transitions, at)
        if then is None:
            continue
        status, since = then[0], parse_time(then[1])
        held = row.job_uid in holding
        deleted = row.deleted_at is not None and row.deleted_at <= at
        occupying = held or status in ADMITTED_STATUSES
        pending = status in PENDING_STATUSES and not held and not deleted
        attempt = preemptions_at(transitions, at, int(row.preemptions))
        out.append((row, _State(status, since, attempt, occupying, pending, transitions)))
    return out


def _jobs(
    conn: Connection, tree: QuotaTree, leaves: frozenset[str], as_at: datetime | None
) -> dict[str, DispatchJob]:
    keys = _tree_keys(tree)
    jobs: dict[str, DispatchJob] = {}
    rows = _rows_now(conn) if as_at is None else _rows_at(conn, as_at)
    workloads = [row.job_uid for row, _ in rows if row.framework in _WORKLOADS]
    scales = _scales(conn, workloads) if as_at is None else {}
    for row, state in rows:
        workspace = row.workspace or ""
        quota = row.quota or tree.bindings.get(workspace)
        spec = tree.specs.get(quota) if quota else None
        if row.framework in _WORKLOADS:
            if as_at is None:
                # a workload may run on an inner quota too (its own leaf in the core)
                placed = quota if quota in tree.specs else None
                for unit in _units(row, state, placed, spec, keys, scales.get(row.job_uid)):
                    jobs[unit.uid] = unit
            continue
        if not state.occupying and not state.pending:
            continue
        since = state.since if state.pending else _admitted_since(state.transitions, state.since)
        jobs[row.job_uid] = DispatchJob(
            uid=row.job_uid,
            name=row.name or row.job_uid,
            namespace=row.namespace or "default",
            kind=row.kind or "Job",
            status=state.status,
            attempt=state.attempt,
            quota=quota if quota in leaves else None,
            workspace=workspace,
            billing_mode=row.billing_mode or "public",
            priority=int(row.priority or 0),
            resources=job_resources(list(row.replicas or ()), spec, keys),
            since=since,
            occupying=state.occupying,
            pending=state.pending,
        )
    return jobs


def read_dispatch(
    conn: Connection,
    now: datetime,
    *,
    blocked_workspaces: frozenset[str] = frozenset(),
    recent: Mapping[str, DecisionRecord] | None = None,
    as_at: bool = False,
    subscriptions: Collection[Subscription] = (),
) -> DispatchView:
    """The cycle's input at ``now`` and what it rests on. ``recent``: decisions the caller
    stored that the read model may not show yet (the newer by position wins).

    ``as_at``: ``now`` is a past instant and the input is the one a cycle at ``now`` had:
    the tree's specs in force then (its bindings as they are now: the read model keeps no
    history of them), the jobs as they stood then, the decisions taken by then
    (the read model keeps a job's latest decision only: one taken later is left out).
    Without it the jobs are read as projected now (the live loop, and what it has
    projected is the latest anyway). ``subscriptions``: what was bought
    (:func:`projections.subscriptions.load_subscriptions`); the quotas drawing on groups
    with no capacity left at ``now`` admit nothing (``CycleInput.expired_quotas``)."""
    tree = quota_tree(conn)
    if as_at:
        # the specs then, in the current tree's order (its arrival order), as a live
        # cycle reads them; a quota deleted since comes after
        then = specs_at(conn, now)
        order = [q for q in tree.specs if q in then] + sorted(set(then) - set(tree.specs))
        tree = QuotaTree(specs={q: then[q] for q in order}, bindings=tree.bindings)
    config = dispatch_config(tree)
    children = tree.children()
    leaves = frozenset(name for name in tree.specs if not children.get(name))
    jobs = _jobs(conn, tree, leaves, now if as_at else None)
    decisions = read_decisions(conn, sorted(jobs))
    if as_at:
        decisions = {
            uid: d for uid, d in decisions.items() if d.decided_at is None or d.decided_at <= now
        }
    for uid, record in (recent or {}).items():
        known = decisions.get(uid)
        if known is None or known.position < record.position:
            decisions[uid] = record

    admitting: set[str] = set()
    stopping: dict[str, str] = {}
    for uid, d in decisions.items():
        job = jobs.get(uid)
        if job is None:
            continue
        # a victim seen preempted (its episode moved on) whose pods are still releasing
        # is still stopping for its preemptor: choosing it again would double the decision
        releasing = (
            d.outcome == "victim" and job.status == "Preempted" and d.attempt + 1 == job.attempt
        )
        if d.attempt != job.attempt and not releasing:
            continue
        if d.outcome == "admit" and job.pending:
            admitting.add(uid)
        elif d.outcome == "victim" and job.occupying and d.preemptor is not None:
            stopping[uid] = d.preemptor
    preempting = frozenset(
        uid
        for uid, d in decisions.items()
        if d.outcome == "preempt"
        and uid in jobs
        and jobs[uid].pending
        and d.attempt == jobs[uid].attempt
        and any(stopping.get(v) == uid for v in d.victims)
    )
    reserved = frozenset(
        uid
        for uid, d in decisions.items()
        if d.outcome == "preempt"
        and uid in jobs
        and jobs[uid].pending
        and d.attempt == jobs[uid].attempt
        and uid not in preempting
    )
    # replicas admitted on public resources, held or being released: outside the quota
    spilled = frozenset(
        uid
        for uid, d in decisions.items()
        if d.outcome == "admit"
        and d.reason == SPILLOVER_REASON
        and uid in jobs
        and (jobs[uid].occupying or uid in admitting)
    )
    parked = frozenset(
        uid
        for uid, d in decisions.items()
        if d.outcome == "pending"
        and d.reason == "Parked"
        and uid in jobs
        and jobs[uid].pending
        and d.attempt == jobs[uid].attempt
    )

    admitted: list[Admitted] = []
    pending: list[Incoming] = []
    unplaced: list[str] = []
    refused: dict[str, str] = {}
    for uid in sorted(jobs):
        job = jobs[uid]
        if job.quota is None:
            unplaced.append(uid)
            continue
        latest = decisions.get(uid)
        if (
            job.pending
            and latest is not None
            and latest.outcome == "refuse"
            and latest.attempt == job.attempt
        ):
            refused[uid] = latest.reason or "InsufficientQuota"
            continue  # a notebook refused at start: it waits for a new scale, not in a queue
        if uid in spilled:
            continue  # on public resources: it counts against no quota
        if job.occupying or uid in admitting:
            decided = decisions[uid].decided_at if uid in admitting else None
            at = decided or (now if uid in admitting else job.since)
            admitted.append(
                Admitted(
                    uid,
                    job.quota,
                    job.priority,
                    job.resources,
                    at,
                    job.workspace,
                    job.billing_mode,
                    job.workload,
                )
            )
        else:
            pending.append(
                Incoming(
                    uid,
                    job.quota,
                    job.priority,
                    job.resources,
                    job.since,
                    job.workspace,
                    job.billing_mode,
                    job.workload,
                    job.spillover,
                )
            )
    cycle = CycleInput(
        quotas=config.quotas,
        admitted=tuple(admitted),
        pending=tuple(pending),
        now=now,
        queues=config.queues,
        parked=parked,
        blocked_workspaces=blocked_workspaces,
        expired_quotas=expired_quotas(tree.specs, subscriptions, now),
        preempting=preempting,
        reserved=reserved,
        fair_sharing=config.fair_sharing,
    )
    return DispatchView(
        cycle=cycle,
        config=config,
        tree=tree,
        jobs=jobs,
        decisions=decisions,
        admitting=frozenset(admitting),
        stopping=stopping,
        unplaced=tuple(unplaced),
        refused=refused,
        spilled=spilled,
    )
