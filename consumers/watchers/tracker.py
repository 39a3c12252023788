"""What the watcher remembers about the cluster, and the transitions it turns into events.

Kubernetes tells a watcher the current state of an object, not what changed. The tracker keeps
the little it needs per UID (a pod's job, node and whether its occupancy is open or closed; a
job's kind, outcome and current replica pods; a service's or notebook's desired replicas and
revision; a node's cordon flag) and emits an event only when
an object crosses a transition it had not crossed before. Everything is keyed by UID, never by
name: a replica restarted under the same name is a new pod with a new occupancy.

The state is a typed record per key (:mod:`consumers.watchers.tracker_state`), stored as
compact JSON through that module's codec so the watcher can persist it next to its
resourceVersions and resume after a restart or a relist without publishing anything twice
(``docs/watchers.md``). Not thread-safe: the watcher calls it under one lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

from consumers.watchers.api_values import parse_time
from consumers.watchers.event_factory import EventFactory
from consumers.watchers.facts import (
    JOB_KINDS,
    JobFacts,
    OwnerRef,
    PodFacts,
    bare_pod_job,
    job_facts,
    node_facts,
    pod_facts,
)
from consumers.watchers.labels import node_flavor
from consumers.watchers.tracker_state import (
    JobStart,
    JobState,
    NodeState,
    PodState,
    ReplicaSlot,
    TrackedState,
    WorkloadState,
    decode_state,
    encode_state,
)
from consumers.watchers.workloads import WORKLOAD_OBJECT_KINDS, WorkloadFacts, workload_facts
from ledger.envelopes import Envelope
from ledger.events import OccupancyEndReason

__all__ = ["DELETED", "OUT_OF_SCOPE", "ClusterTracker", "StateDelta", "state_key"]

DELETED = "DELETED"
OUT_OF_SCOPE = "OUT_OF_SCOPE"

Object = Mapping[str, Any]
State = dict[str, Any]  # a record's stored JSON (tracker_state.encode_state)
_T = TypeVar("_T", NodeState, JobState, PodState, JobStart, WorkloadState)


def state_key(resource: str, obj: Object) -> str:
    """The tracker's key of an object: ``pod/<uid>``, ``job/<uid>``, ``workload/<uid>``,
    ``node/<name>``."""
    meta = obj.get("metadata") or {}
    if resource == "nodes":
        return f"node/{meta.get('name')}"
    if resource == "pods":
        return f"pod/{meta.get('uid')}"
    if resource == "workloads":
        return f"workload/{meta.get('uid')}"
    return f"job/{meta.get('uid')}"


@dataclass(frozen=True, slots=True)
class StateDelta:
    """Keys changed since the last checkpoint: new JSON state, or None when forgotten."""

    changes: dict[str, State | None]


@dataclass(slots=True)
class _Pending:
    since: float
    rv: int
    kind: str
    obj: Object


class ClusterTracker:
    """Per-UID state of pods, jobs and nodes; ``observe`` returns the new events."""

    def __init__(
        self,
        factory: EventFactory,
        clock: Callable[[], datetime],
        *,
        watched_job_kinds: Iterable[str] = tuple(JOB_KINDS),
        watched_workload_kinds: Iterable[str] = tuple(sorted(WORKLOAD_OBJECT_KINDS)),
        watch_nodes: bool = True,
        orphan_grace: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.factory = factory
        self.clock = clock
        self.watched_job_kinds = frozenset(watched_job_kinds)
        # a replica of a workload kind not watched is accounted as its own job, as before
        self.watched_workload_kinds = frozenset(watched_workload_kinds)
        self.watch_nodes = watch_nodes  # False: no node will show up, none is waited for
        self.orphan_grace = orphan_grace
        self.monotonic = monotonic
        self.state: dict[str, TrackedState] = {}
        self._names: dict[tuple[str, str], str] = {}  # (namespace, job name) -> job uid
        # (namespace, kind, name) -> uid of a service or notebook (a Deployment's replica
        # names only its ReplicaSet, so it finds its Deployment by name)
        self._workload_names: dict[tuple[str, str, str], str] = {}
        self._dirty: dict[str, TrackedState | None] = {}
        # pod events waiting for their owning job to be seen (so the job stream starts with
        # JobSubmitted), keyed by owner uid or "name:<ns>/<name>"
        self._pending: dict[str, list[_Pending]] = {}
        # pod events behind one whose node is not seen yet (its GPU model is the
        # occupancy's flavor), in arrival order: pods keep their order (restarts)
        self._node_queue: list[_Pending] = []

    # -- persistence -----------------------------------------------------------------------

    def load(self, rows: Mapping[str, Mapping[str, Any]]) -> None:
        """Resume from the stored JSON of every key (any version's, see tracker_state)."""
        self.state = {k: decode_state(k, v) for k, v in rows.items()}
        self._names = {
            (s.namespace, s.name): k.split("/", 1)[1]
            for k, s in self.state.items()
            if isinstance(s, JobState) and s.kind != "Pod"
        }
        self._workload_names = {
            (s.namespace, s.kind, s.name): k.split("/", 1)[1]
            for k, s in self.state.items()
            if isinstance(s, WorkloadState)
        }
        self._dirty.clear()

    def take_delta(self) -> StateDelta:
        delta = StateDelta(
            {k: (encode_state(v) if v is not None else None) for k, v in self._dirty.items()}
        )
        self._dirty.clear()
        return delta

    def _get(self, key: str, kind: type[_T]) -> _T | None:
        """The record of ``key`` (its prefix decides its type)."""
        st = self.state.get(key)
        return st if isinstance(st, kind) else None

    def _put(self, key: str, value: TrackedState) -> None:
        self.state[key] = value
        self._dirty[key] = value

    def _drop(self, key: str) -> None:
        if self.state.pop(key, None) is not None:
            self._dirty[key] = None

    def keys_of(self, resource: str, job_kind: str | None = None) -> set[str]:
        """Known keys of one watched resource (for relist reconciliation)."""
        if resource == "nodes":
            return {k for k in self.state if k.startswith("node/")}
        if resource == "pods":
            return {k for k in self.state if k.startswith("pod/")}
        if resource == "workloads":
            return {
                k
                for k, s in self.state.items()
                if isinstance(s, WorkloadState) and s.kind == job_kind
            }
        return {k for k, s in self.state.items() if isinstance(s, JobState) and s.kind == job_kind}

    def pending_min_rv(self) -> int | None:
        rvs = [p.rv for items in self._pending.values() for p in items]
        rvs += [p.rv for p in self._node_queue]
        return min(rvs) if rvs else None

    @property
    def pending_count(self) -> int:
        return sum(len(v) for v in self._pending.values()) + len(self._node_queue)

    # -- entry points ----------------------------------------------------------------------

    def observe(self, resource: str, kind: str, obj: Object) -> list[Envelope]:
        """One watch event or listed object (kind ADDED/MODIFIED/DELETED/OUT_OF_SCOPE)."""
        if resource == "nodes":
            return self._node(kind, obj)
        if resource == "pods":
            return self._pod(kind, obj)
        if resource == "workloads":
            return self._workload(kind, obj)
        return self._job(kind, obj)

    def vanished(self, keys: Iterable[str]) -> list[Envelope]:
        """Objects the tracker knew that a fresh LIST no longer has: exactly one end each."""
        out: list[Envelope] = []
        now = self.clock()
        for key in sorted(keys):
            st = self.state.get(key)
            if isinstance(st, PodState):
                out += self._end_pod(key, st, now, "vanished-during-relist", True, now)
                self._replica_done(key.split("/", 1)[1], st, now)
                if st.bare:
                    out.append(
                        self.factory.job_transition(
                            "Pod", st.job_uid, "deleted", now, now, reason="vanished-during-relist"
                        )
                    )
                    self._drop(f"job/{st.job_uid}")
                self._drop(key)
            elif isinstance(st, JobState):
                uid = key.split("/", 1)[1]
                out.append(
                    self.factory.job_transition(
                        st.kind, uid, "deleted", now, now, reason="vanished-during-relist"
                    )
                )
                self._forget_job(key, st)
            elif isinstance(st, WorkloadState):
                uid = key.split("/", 1)[1]
                out.append(
                    self.factory.workload_deleted(
                        st.kind, uid, now, now, reason="vanished-during-relist"
                    )
                )
                self._forget_workload(key, st)
            elif isinstance(st, NodeState):
                name = key.split("/", 1)[1]
                out.append(self.factory.node_removed(name, st.uid, now, now))
                self._drop(key)
        return out

    def flush_orphans(self, *, force: bool = False) -> list[Envelope]:
        """Pod events whose job or node never showed up within ``orphan_grace``: map them
        anyway (a pod whose node is unknown then occupies ``gpu/any``)."""
        now = self.monotonic()
        out: list[Envelope] = self._drain_node_queue(
            lambda item: force or now - item.since >= self.orphan_grace
        )
        for key in list(self._pending):
            items = self._pending[key]
            if force or now - items[0].since >= self.orphan_grace:
                del self._pending[key]
                for item in items:
                    out += self._pod(item.kind, item.obj, wait=False, wait_node=False)
        return out

    def open_occupancy_events(self, obj: Object) -> Envelope | None:
        """The OccupancyStarted a live, bound pod implies (drift repair re-checks these)."""
        pod = pod_facts(obj)
        if pod.scheduled_at is None or pod.terminal:
            return None
        st = self._get(f"pod/{pod.uid}", PodState)
        job_uid = st.job_uid if st else self._job_uid(pod)
        if job_uid is None:
            return None
        return self.factory.occupancy_started(
            pod, job_uid, self.clock(), self._node_flavor(pod.node)
        )

    def _needs_node(self, pod: PodFacts, st: PodState | None) -> bool:
        """Whether ``pod``'s occupancy would start now on a node not seen yet."""
        return bool(
            self.watch_nodes
            and self.orphan_grace > 0
            and pod.node
            and pod.scheduled_at is not None
            and f"node/{pod.node}" not in self.state
            and (st is None or (st.started_at is None and not st.ended))
            and pod.named_flavor is None
        )

    def _drain_node_queue(self, expired: Callable[[_Pending], bool]) -> list[Envelope]:
        """Map the queued pod events in order, up to one still waiting for its node."""
        out: list[Envelope] = []
        while self._node_queue:
            item = self._node_queue[0]
            pod = pod_facts(item.obj)
            if self._needs_node(pod, self._get(f"pod/{pod.uid}", PodState)) and not expired(item):
                break
            self._node_queue.pop(0)
            out += self._pod(item.kind, item.obj, wait_node=False)
        return out

    def _node_flavor(self, name: str | None) -> str | None:
        """``gpu/<model>`` of a known node with a GPU product label, else None."""
        st = self._get(f"node/{name}", NodeState) if name else None
        return st.flavor if st else None

    # -- nodes -----------------------------------------------------------------------------

    def _node(self, kind: str, obj: Object) -> list[Envelope]:
        node = node_facts(obj)
        key = f"node/{node.name}"
        st = self._get(key, NodeState)
        now = self.clock()
        out: list[Envelope] = []
        if kind in (DELETED, OUT_OF_SCOPE):
            if st is not None:
                at = parse_time((obj.get("metadata") or {}).get("deletionTimestamp")) or now
                out.append(self.factory.node_removed(node.name, st.uid, at, now))
                self._drop(key)
            return out
        if st is not None and st.uid != node.uid:  # same name, new node object
            out.append(self.factory.node_removed(node.name, st.uid, node.created_at or now, now))
            st = None
        labels = (obj.get("metadata") or {}).get("labels") or {}
        flavor = node_flavor(labels)
        if st is None:
            out.append(self.factory.node_registered(node, now))
            if node.unschedulable:
                out.append(self.factory.node_cordoned(node, now))
            self._put(key, NodeState(node.uid, node.unschedulable, flavor))
            out += self._drain_node_queue(lambda _item: False)  # pods that waited for it
        elif st.cordoned != node.unschedulable:
            out.append(self.factory.node_cordoned(node, now))
            self._put(key, NodeState(node.uid, node.unschedulable, flavor))
        elif st.flavor != flavor:  # relabelled: later occupancies on it take the new model
            self._put(key, replace(st, flavor=flavor))
        return out

    # -- jobs ------------------------------------------------------------------------------

    def _job(self, kind: str, obj: Object) -> list[Envelope]:
        job = job_facts(obj)
        key = f"job/{job.uid}"
        st = self._get(key, JobState)
        now = self.clock()
        out: list[Envelope] = []
        if kind in (DELETED, OUT_OF_SCOPE):
            if st is None and kind == DELETED:
                # never seen alive (deleted between two lists): still a submitted job
                out.append(self.factory.job_submitted(job, now))
                st, started = self._pending_start(job, self._new_job_state(job), now)
                out += started
                out += self._job_outcome(job, st, now)
            if st is not None:
                if kind == DELETED:
                    out.append(
                        self.factory.job_transition(
                            job.kind, job.uid, "deleted", job.deletion_at or now, now
                        )
                    )
                self._forget_job(key, st)
            out += self._release(job)
            return out
        first = st is None
        if st is None:
            out.append(self.factory.job_submitted(job, now))
            st, started = self._pending_start(job, self._new_job_state(job), now)
            out += started
            self._put(key, st)
            self._names[(job.namespace, job.name)] = job.uid
        st, suspension = self._suspension(job, st, first, now)
        out += suspension
        out += self._job_outcome(job, st, now)
        out += self._release(job)
        return out

    def _suspension(
        self, job: JobFacts, st: JobState, first: bool, now: datetime
    ) -> tuple[JobState, list[Envelope]]:
        """Queued, admitted and preempted, from the job's ``Suspended`` condition.

        The condition is what the job controller did (it deletes the pods, then sets it);
        ``spec.suspend`` alone is only a request, trusted for a job seen for the first time
        that never ran (created suspended: queued since its creation). Each step's event id
        is keyed by the condition's transition time, so a relist yields the same events.
        """
        if st.outcome is not None or job.outcome is not None:
            return st, []
        suspended = job.suspended
        at = job.suspended_changed_at
        if suspended is None:
            if not (first and job.suspend_requested and not st.started):
                return st, []
            suspended, at = True, None
        stamp = at.isoformat() if at is not None else f"rv{job.resource_version}"
        out: list[Envelope] = []
        reason = job.suspended_reason
        if suspended:
            if st.queue in ("queued", "preempted"):
                return st, []
            if st.queue == "admitted" or st.started:
                out.append(
                    self.factory.job_transition(
                        job.kind, job.uid, "preempted", at or now, now, reason=reason, key=stamp
                    )
                )
                st = replace(st, queue="preempted")
            else:
                queued_at = (job.created_at or at or now) if first else (at or now)
                out.append(self.factory.job_transition(job.kind, job.uid, "queued", queued_at, now))
                st = replace(st, queue="queued")
        else:
            if st.queue == "admitted":
                return st, []
            if st.queue is None and not st.started:
                # resumed before the watcher saw it suspended: it was queued since creation
                queued_at = job.created_at or at or now
                out.append(self.factory.job_transition(job.kind, job.uid, "queued", queued_at, now))
            out.append(
                self.factory.job_transition(
                    job.kind, job.uid, "admitted", at or now, now, reason=reason, key=stamp
                )
            )
            st = replace(st, queue="admitted", resumed_at=at or now)
        self._put(f"job/{job.uid}", st)
        return st, out

    @staticmethod
    def _new_job_state(job: JobFacts) -> JobState:
        return JobState(job.kind, job.name, job.namespace)

    def _pending_start(
        self, job: JobFacts, st: JobState, now: datetime
    ) -> tuple[JobState, list[Envelope]]:
        """JobStarted for a job whose pod started before the job itself was seen."""
        pending = self._get(f"jobstart/{job.uid}", JobStart)
        if pending is None:
            return st, []
        self._drop(f"jobstart/{job.uid}")
        started = self.factory.job_transition(job.kind, job.uid, "started", pending.at, now)
        return replace(st, started=True), [started]

    def _job_outcome(self, job: JobFacts, st: JobState, now: datetime) -> list[Envelope]:
        if job.outcome is None or st.outcome is not None:
            return []
        st = replace(st, outcome=job.outcome)
        self._put(f"job/{job.uid}", st)
        return [
            self.factory.job_transition(
                job.kind,
                job.uid,
                job.outcome,
                job.outcome_at or now,
                now,
                reason=job.outcome_reason,
            )
        ]

    def _forget_job(self, key: str, st: JobState) -> None:
        if self._names.get((st.namespace, st.name)) == key.split("/", 1)[1]:
            del self._names[(st.namespace, st.name)]
        self._drop(key)

    def _release(self, job: JobFacts) -> list[Envelope]:
        """Pod events that waited for this job."""
        return self._release_waiting(job.uid, f"name:{job.namespace}/{job.name}")

    def _release_waiting(self, *keys: str) -> list[Envelope]:
        """Pod events that waited under ``keys`` (an owner's uid, its name key), mapped now."""
        out: list[Envelope] = []
        for key in keys:
            for item in self._pending.pop(key, []):
                out += self._pod(item.kind, item.obj, wait=False)
        return out

    # -- services and notebooks --------------------------------------------------------------

    def _workload(self, kind: str, obj: Object) -> list[Envelope]:
        w = workload_facts(obj)
        if w.owned:
            return []  # a LeaderWorkerSet's StatefulSet: its pods belong to the LeaderWorkerSet
        key = f"workload/{w.uid}"
        st = self._get(key, WorkloadState)
        now = self.clock()
        out: list[Envelope] = []
        if kind in (DELETED, OUT_OF_SCOPE):
            if st is None and kind == DELETED:  # never seen alive: still created
                out.append(self.factory.workload_created(w, now))
                st = WorkloadState(w.kind, w.name, w.namespace, w.replicas, w.revision)
            if st is not None:
                if kind == DELETED:
                    at = w.deletion_at or now
                    out.append(self.factory.workload_deleted(w.kind, w.uid, at, now))
                self._forget_workload(key, st)
            out += self._release_workload(w)
            return out
        if st is None:
            out.append(self.factory.workload_created(w, now))
            self._workload_names[(w.namespace, w.kind, w.name)] = w.uid
        else:
            if st.replicas != w.replicas:
                out.append(self.factory.workload_scaled(w, st.replicas, now))
            if st.revision != w.revision:
                out.append(self.factory.workload_updated(w, now))
        new = WorkloadState(w.kind, w.name, w.namespace, w.replicas, w.revision)
        if new != st:
            self._put(key, new)
        out += self._release_workload(w)
        return out

    def _forget_workload(self, key: str, st: WorkloadState) -> None:
        uid = key.split("/", 1)[1]
        if self._workload_names.get((st.namespace, st.kind, st.name)) == uid:
            del self._workload_names[(st.namespace, st.kind, st.name)]
        self._drop(key)

    def _release_workload(self, w: WorkloadFacts) -> list[Envelope]:
        """Replica pod events that waited for this workload."""
        return self._release_waiting(w.uid, f"name:{w.namespace}/{w.kind}/{w.name}")

    # -- pods ------------------------------------------------------------------------------

    def _owner(self, pod: PodFacts) -> OwnerRef | None:
        """The pod's owner as the tracker follows it: a replica of a workload kind not
        watched has none (it is accounted as its own job, as before workloads were)."""
        owner = pod.owner
        if (
            owner is not None
            and owner.kind in WORKLOAD_OBJECT_KINDS
            and owner.kind not in self.watched_workload_kinds
        ):
            return None
        return owner

    def _job_uid(self, pod: PodFacts) -> str | None:
        """The owning job's (or workload's) uid: from the owner reference, else by name;
        None if unknown."""
        owner = self._owner(pod)
        if owner is None:
            return pod.uid
        if owner.uid is not None:
            return owner.uid
        if owner.kind in WORKLOAD_OBJECT_KINDS:
            return self._workload_names.get((pod.namespace, owner.kind, owner.name))
        return self._names.get((pod.namespace, owner.name))

    def _pod(
        self, kind: str, obj: Object, *, wait: bool = True, wait_node: bool = True
    ) -> list[Envelope]:
        pod = pod_facts(obj)
        key = f"pod/{pod.uid}"
        st = self._get(key, PodState)
        if wait_node and (self._node_queue or self._needs_node(pod, st)):
            # its occupancy is about to start on a node not seen yet (or an earlier pod
            # event waits for one): wait for the node's GPU model, so the flavor does not
            # depend on which watch came first
            self._node_queue.append(_Pending(self.monotonic(), pod.resource_version, kind, obj))
            return []
        if st is None:
            owner = self._owner(pod)
            job_uid = self._job_uid(pod)
            waiting_key: str | None = None
            if owner is not None and owner.kind in WORKLOAD_OBJECT_KINDS:
                if job_uid is None:
                    waiting_key = f"name:{pod.namespace}/{owner.kind}/{owner.name}"
                elif f"workload/{job_uid}" not in self.state:
                    waiting_key = job_uid
            elif owner is not None and (owner.kind is None or owner.kind in self.watched_job_kinds):
                if job_uid is None:
                    waiting_key = f"name:{pod.namespace}/{owner.name}"
                elif f"job/{job_uid}" not in self.state:
                    waiting_key = job_uid
            if wait and waiting_key is not None and self.orphan_grace > 0:
                self._pending.setdefault(waiting_key, []).append(
                    _Pending(self.monotonic(), pod.resource_version, kind, obj)
                )
                return []
            if job_uid is None or (
                owner is not None
                and owner.kind in WORKLOAD_OBJECT_KINDS
                and f"workload/{job_uid}" not in self.state
            ):
                job_uid = pod.uid  # an owner we never saw: account the pod as its own job
            return self._new_pod(
                kind, pod, job_uid, owner is None or job_uid == pod.uid, owner_kind(owner)
            )
        return self._pod_update(kind, pod, key, st)

    def _new_pod(
        self, kind: str, pod: PodFacts, job_uid: str, bare: bool, owner_kind: str | None
    ) -> list[Envelope]:
        now = self.clock()
        out: list[Envelope] = []
        job_kind = "Pod"
        jst: JobState | None
        if bare:
            out.append(self.factory.job_submitted(bare_pod_job(pod), now))
            jst = JobState("Pod", pod.name, pod.namespace)
            self._put(f"job/{job_uid}", jst)
        else:
            # a workload's replica has no job state: replicas come and go with its scale
            jst = self._get(f"job/{job_uid}", JobState)
            job_kind = (jst.kind if jst else None) or owner_kind or "Job"
        # a replica pod created after the earlier pod of its replica slot ended is a restart
        # (comparing times, not arrival order: an initial LIST is state, not a sequence)
        previous = jst.replicas.get(pod.replica) if jst else None
        if (
            previous is not None
            and previous.pod_uid != pod.uid
            and previous.ended_at is not None
            and not _resumed(jst, previous.ended_at)
        ):
            ended = previous.ended_at
            if pod.created_at is None or pod.created_at >= ended:
                out.append(
                    self.factory.job_transition(
                        job_kind,
                        job_uid,
                        "restarted",
                        pod.created_at or now,
                        now,
                        reason=f"replica {pod.replica} replaced",
                        key=pod.uid,
                    )
                )
        if jst:
            self._put(f"job/{job_uid}", jst.with_slot(pod.replica, ReplicaSlot(pod.uid)))
        st = PodState(pod.name, pod.namespace, job_uid, job_kind, bare, pod.replica)
        self._put(f"pod/{pod.uid}", st)
        return out + self._pod_update(kind, pod, f"pod/{pod.uid}", st)

    def _pod_update(self, kind: str, pod: PodFacts, key: str, st: PodState) -> list[Envelope]:
        now = self.clock()
        out: list[Envelope] = []
        job_uid = st.job_uid
        if st.started_at is None and not st.ended and pod.scheduled_at is not None:
            out.append(
                self.factory.occupancy_started(pod, job_uid, now, self._node_flavor(pod.node))
            )
            st = replace(st, started_at=pod.scheduled_at)
            jkey = f"job/{job_uid}"
            jst = self._get(jkey, JobState)
            if st.job_kind in WORKLOAD_OBJECT_KINDS:
                pass  # a service runs while its replicas do: no JobStarted
            elif jst is not None and not jst.started:
                out.append(
                    self.factory.job_transition(
                        st.job_kind, job_uid, "started", pod.scheduled_at, now
                    )
                )
                self._put(jkey, replace(jst, started=True))
            elif jst is None:
                # The job object is not known yet (pods and jobs arrive on separate
                # streams): remember the start so the job's first sighting emits it.
                # Otherwise whether JobStarted exists would depend on arrival timing.
                pending = self._get(f"jobstart/{job_uid}", JobStart)
                if pending is None or pod.scheduled_at < pending.at:
                    self._put(f"jobstart/{job_uid}", JobStart(pod.scheduled_at, st.job_kind))
        started = st.started_at
        if kind == OUT_OF_SCOPE:
            if started is not None and not st.ended:
                exact = pod.terminal and pod.finished_at is not None
                at = pod.finished_at if exact and pod.finished_at else now
                out += self._end_pod(key, st, at, "out-of-scope", not exact, now)
            self._replica_done(pod.uid, st, pod.finished_at or now)
            self._drop(key)
            return out
        if pod.terminal and not st.ended:
            if started is not None:
                exact = pod.finished_at is not None
                at = pod.finished_at or pod.deletion_at or now
                out += self._end_pod(key, st, at, pod.end_reason, not exact, now)
            st = replace(st, ended=True)
            self._replica_done(pod.uid, st, pod.finished_at or pod.deletion_at or now)
            if st.bare and st.outcome is None:
                outcome = "succeeded" if pod.phase == "Succeeded" else "failed"
                at = pod.finished_at or now
                out.append(self.factory.job_transition("Pod", job_uid, outcome, at, now))
                st = replace(st, outcome=outcome)
        if kind == DELETED:
            if started is not None and not st.ended:
                at = pod.deletion_at or now
                reason: OccupancyEndReason = (
                    "preempted" if pod.end_reason == "preempted" else "deleted"
                )
                out += self._end_pod(key, st, at, reason, True, now)
            self._replica_done(pod.uid, st, pod.finished_at or pod.deletion_at or now)
            if st.bare:
                out.append(
                    self.factory.job_transition(
                        "Pod", job_uid, "deleted", pod.deletion_at or pod.finished_at or now, now
                    )
                )
                self._drop(f"job/{job_uid}")
            self._drop(key)
            return out
        if st != self.state.get(key):
            self._put(key, st)
        return out

    def _replica_done(self, pod_uid: str, st: PodState, at: datetime) -> None:
        """Remember when the pod of a replica slot stopped (restart detection)."""
        jkey = f"job/{st.job_uid}"
        jst = self._get(jkey, JobState)
        if jst is None:
            return
        slot = jst.replicas.get(st.replica)
        if slot is not None and slot.pod_uid == pod_uid and slot.ended_at is None:
            self._put(jkey, jst.with_slot(st.replica, ReplicaSlot(pod_uid, at)))

    def _end_pod(
        self,
        key: str,
        st: PodState,
        at: datetime,
        reason: OccupancyEndReason,
        estimated: bool,
        now: datetime,
    ) -> list[Envelope]:
        if st.started_at is None or st.ended:
            return []
        uid = key.split("/", 1)[1]
        self._put(key, replace(st, ended=True))
        return [
            self.factory.occupancy_ended(
                uid, st.job_uid, at, reason, estimated, now, st.started_at, pod_name=st.name
            )
        ]


def owner_kind(owner: OwnerRef | None) -> str | None:
    return owner.kind if owner is not None else None


def _resumed(job: JobState | None, ended_at: datetime) -> bool:
    """Whether a replica's new pod is the job's resumption, not a restart: the job is
    suspended (its controller makes pods only on resume) or resumed since the old pod."""
    if job is None:
        return False
    if job.queue == "preempted":
        return True
    return job.queue == "admitted" and job.resumed_at is not None and job.resumed_at >= ended_at
