"""What the watcher remembers about the cluster, and the transitions it turns into events.

Kubernetes tells a watcher the current state of an object, not what changed. The tracker keeps
the little it needs per UID (a pod's job, node and whether its occupancy is open or closed; a
job's kind, outcome and current replica pods; a node's cordon flag) and emits an event only when
an object crosses a transition it had not crossed before. Everything is keyed by UID, never by
name: a replica restarted under the same name is a new pod with a new occupancy.

The state is plain JSON per key so the watcher can persist it next to its resourceVersions and
resume after a restart or a relist without publishing anything twice (``docs/watchers.md``).
Not thread-safe: the watcher calls it under one lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from consumers.watchers.mapping import (
    JOB_KINDS,
    EventFactory,
    JobFacts,
    PodFacts,
    job_facts,
    node_facts,
    node_flavor,
    parse_time,
    pod_facts,
)
from ledger.envelopes import Envelope
from ledger.events import OccupancyEndReason

__all__ = ["DELETED", "OUT_OF_SCOPE", "ClusterTracker", "StateDelta", "state_key"]

DELETED = "DELETED"
OUT_OF_SCOPE = "OUT_OF_SCOPE"

Object = Mapping[str, Any]
State = dict[str, Any]


def state_key(resource: str, obj: Object) -> str:
    """The tracker's key of an object: ``pod/<uid>``, ``job/<uid>``, ``node/<name>``."""
    meta = obj.get("metadata") or {}
    if resource == "nodes":
        return f"node/{meta.get('name')}"
    if resource == "pods":
        return f"pod/{meta.get('uid')}"
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
        watch_nodes: bool = True,
        orphan_grace: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.factory = factory
        self.clock = clock
        self.watched_job_kinds = frozenset(watched_job_kinds)
        self.watch_nodes = watch_nodes  # False: no node will show up, none is waited for
        self.orphan_grace = orphan_grace
        self.monotonic = monotonic
        self.state: dict[str, State] = {}
        self._names: dict[tuple[str, str], str] = {}  # (namespace, job name) -> job uid
        self._dirty: dict[str, State | None] = {}
        # pod events waiting for their owning job to be seen (so the job stream starts with
        # JobSubmitted), keyed by owner uid or "name:<ns>/<name>"
        self._pending: dict[str, list[_Pending]] = {}
        # pod events behind one whose node is not seen yet (its GPU model is the
        # occupancy's flavor), in arrival order: pods keep their order (restarts)
        self._node_queue: list[_Pending] = []

    # -- persistence -----------------------------------------------------------------------

    def load(self, rows: Mapping[str, State]) -> None:
        self.state = {k: dict(v) for k, v in rows.items()}
        self._names = {
            (s["ns"], s["n"]): k.split("/", 1)[1]
            for k, s in self.state.items()
            if k.startswith("job/") and s.get("k") != "Pod"
        }
        self._dirty.clear()

    def take_delta(self) -> StateDelta:
        delta = StateDelta(
            {k: (dict(v) if v is not None else None) for k, v in self._dirty.items()}
        )
        self._dirty.clear()
        return delta

    def _put(self, key: str, value: State) -> None:
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
        return {k for k, s in self.state.items() if k.startswith("job/") and s.get("k") == job_kind}

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
        return self._job(kind, obj)

    def vanished(self, keys: Iterable[str]) -> list[Envelope]:
        """Objects the tracker knew that a fresh LIST no longer has: exactly one end each."""
        out: list[Envelope] = []
        now = self.clock()
        for key in sorted(keys):
            st = self.state.get(key)
            if st is None:
                continue
            if key.startswith("pod/"):
                out += self._end_pod(key, st, now, "vanished-during-relist", True, now)
                self._replica_done(key.split("/", 1)[1], st, now)
                if st.get("bare"):
                    out.append(
                        self.factory.job_transition(
                            "Pod", st["j"], "deleted", now, now, reason="vanished-during-relist"
                        )
                    )
                    self._drop(f"job/{st['j']}")
                self._drop(key)
            elif key.startswith("job/"):
                uid = key.split("/", 1)[1]
                out.append(
                    self.factory.job_transition(
                        st["k"], uid, "deleted", now, now, reason="vanished-during-relist"
                    )
                )
                self._forget_job(key, st)
            else:
                name = key.split("/", 1)[1]
                out.append(self.factory.node_removed(name, st["uid"], now, now))
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
        st = self.state.get(f"pod/{pod.uid}")
        job_uid = st["j"] if st else self._job_uid(pod)
        if job_uid is None:
            return None
        return self.factory.occupancy_started(
            pod, job_uid, self.clock(), self._node_flavor(pod.node)
        )

    def _needs_node(self, pod: PodFacts, st: State | None) -> bool:
        """Whether ``pod``'s occupancy would start now on a node not seen yet."""
        return bool(
            self.watch_nodes
            and self.orphan_grace > 0
            and pod.node
            and pod.scheduled_at is not None
            and f"node/{pod.node}" not in self.state
            and (st is None or (st["s"] is None and not st["e"]))
            and pod.named_flavor is None
        )

    def _drain_node_queue(self, expired: Callable[[_Pending], bool]) -> list[Envelope]:
        """Map the queued pod events in order, up to one still waiting for its node."""
        out: list[Envelope] = []
        while self._node_queue:
            item = self._node_queue[0]
            pod = pod_facts(item.obj)
            if self._needs_node(pod, self.state.get(f"pod/{pod.uid}")) and not expired(item):
                break
            self._node_queue.pop(0)
            out += self._pod(item.kind, item.obj, wait_node=False)
        return out

    def _node_flavor(self, name: str | None) -> str | None:
        """``gpu/<model>`` of a known node with a GPU product label, else None."""
        st = self.state.get(f"node/{name}") if name else None
        return st.get("f") if st else None

    # -- nodes -----------------------------------------------------------------------------

    def _node(self, kind: str, obj: Object) -> list[Envelope]:
        node = node_facts(obj)
        key = f"node/{node.name}"
        st = self.state.get(key)
        now = self.clock()
        out: list[Envelope] = []
        if kind in (DELETED, OUT_OF_SCOPE):
            if st is not None:
                at = parse_time((obj.get("metadata") or {}).get("deletionTimestamp")) or now
                out.append(self.factory.node_removed(node.name, st["uid"], at, now))
                self._drop(key)
            return out
        if st is not None and st["uid"] != node.uid:  # same name, new node object
            out.append(self.factory.node_removed(node.name, st["uid"], node.created_at or now, now))
            st = None
        labels = (obj.get("metadata") or {}).get("labels") or {}
        flavor = node_flavor(labels)
        if st is None:
            out.append(self.factory.node_registered(node, now))
            if node.unschedulable:
                out.append(self.factory.node_cordoned(node, now))
            self._put(key, {"uid": node.uid, "c": node.unschedulable, "f": flavor})
            out += self._drain_node_queue(lambda _item: False)  # pods that waited for it
        elif bool(st["c"]) != node.unschedulable:
            out.append(self.factory.node_cordoned(node, now))
            self._put(key, {"uid": node.uid, "c": node.unschedulable, "f": flavor})
        elif st.get("f") != flavor:  # relabelled: later occupancies on it take the new model
            self._put(key, {**st, "f": flavor})
        return out

    # -- jobs ------------------------------------------------------------------------------

    def _job(self, kind: str, obj: Object) -> list[Envelope]:
        job = job_facts(obj)
        key = f"job/{job.uid}"
        st = self.state.get(key)
        now = self.clock()
        out: list[Envelope] = []
        if kind in (DELETED, OUT_OF_SCOPE):
            if st is None and kind == DELETED:
                # never seen alive (deleted between two lists): still a submitted job
                out.append(self.factory.job_submitted(job, now))
                st = self._new_job_state(job)
                out += self._pending_start(job, st, now)
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
        if st is None:
            out.append(self.factory.job_submitted(job, now))
            st = self._new_job_state(job)
            out += self._pending_start(job, st, now)
            self._put(key, st)
            self._names[(job.namespace, job.name)] = job.uid
        out += self._job_outcome(job, st, now)
        out += self._release(job)
        return out

    @staticmethod
    def _new_job_state(job: JobFacts) -> State:
        return {
            "k": job.kind,
            "n": job.name,
            "ns": job.namespace,
            "st": False,
            "o": None,
            "rep": {},
        }

    def _pending_start(self, job: JobFacts, st: State, now: datetime) -> list[Envelope]:
        """JobStarted for a job whose pod started before the job itself was seen."""
        pending = self.state.get(f"jobstart/{job.uid}")
        if pending is None:
            return []
        self._drop(f"jobstart/{job.uid}")
        st["st"] = True
        at = datetime.fromisoformat(pending["at"])
        return [self.factory.job_transition(job.kind, job.uid, "started", at, now)]

    def _job_outcome(self, job: JobFacts, st: State, now: datetime) -> list[Envelope]:
        if job.outcome is None or st.get("o") is not None:
            return []
        st = {**st, "o": job.outcome}
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

    def _forget_job(self, key: str, st: State) -> None:
        if self._names.get((st["ns"], st["n"])) == key.split("/", 1)[1]:
            del self._names[(st["ns"], st["n"])]
        self._drop(key)

    def _release(self, job: JobFacts) -> list[Envelope]:
        """Pod events that waited for this job."""
        out: list[Envelope] = []
        for key in (job.uid, f"name:{job.namespace}/{job.name}"):
            for item in self._pending.pop(key, []):
                out += self._pod(item.kind, item.obj, wait=False)
        return out

    # -- pods ------------------------------------------------------------------------------

    def _job_uid(self, pod: PodFacts) -> str | None:
        """The owning job's uid: from the owner reference, else by name; None if unknown."""
        owner = pod.owner
        if owner is None:
            return pod.uid
        if owner.uid is not None:
            return owner.uid
        return self._names.get((pod.namespace, owner.name))

    def _pod(
        self, kind: str, obj: Object, *, wait: bool = True, wait_node: bool = True
    ) -> list[Envelope]:
        pod = pod_facts(obj)
        key = f"pod/{pod.uid}"
        st = self.state.get(key)
        if wait_node and (self._node_queue or self._needs_node(pod, st)):
            # its occupancy is about to start on a node not seen yet (or an earlier pod
            # event waits for one): wait for the node's GPU model, so the flavor does not
            # depend on which watch came first
            self._node_queue.append(_Pending(self.monotonic(), pod.resource_version, kind, obj))
            return []
        if st is None:
            owner = pod.owner
            job_uid = self._job_uid(pod)
            waiting_key: str | None = None
            if owner is not None and (owner.kind is None or owner.kind in self.watched_job_kinds):
                if job_uid is None:
                    waiting_key = f"name:{pod.namespace}/{owner.name}"
                elif f"job/{job_uid}" not in self.state:
                    waiting_key = job_uid
            if wait and waiting_key is not None and self.orphan_grace > 0:
                self._pending.setdefault(waiting_key, []).append(
                    _Pending(self.monotonic(), pod.resource_version, kind, obj)
                )
                return []
            if job_uid is None:
                job_uid = pod.uid  # an owner we never saw: account the pod as its own job
            return self._new_pod(kind, pod, job_uid, owner is None or job_uid == pod.uid)
        return self._pod_update(kind, pod, key, st)

    def _new_pod(self, kind: str, pod: PodFacts, job_uid: str, bare: bool) -> list[Envelope]:
        now = self.clock()
        out: list[Envelope] = []
        job_kind = "Pod"
        if bare:
            out.append(self.factory.job_submitted(self.factory.bare_pod_job(pod), now))
            jst: State = {"k": "Pod", "n": pod.name, "ns": pod.namespace, "st": False, "o": None}
            jst["rep"] = {}
            self._put(f"job/{job_uid}", jst)
        else:
            jst = self.state.get(f"job/{job_uid}") or {}
            job_kind = jst.get("k") or (pod.owner.kind if pod.owner else None) or "Job"
        # a replica pod created after the earlier pod of its replica slot ended is a restart
        # (comparing times, not arrival order: an initial LIST is state, not a sequence)
        replicas = dict(jst.get("rep") or {})
        previous = replicas.get(pod.replica)
        if jst and previous is not None and previous[0] != pod.uid and previous[1] is not None:
            ended = datetime.fromisoformat(previous[1])
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
            replicas[pod.replica] = [pod.uid, None]
            self._put(f"job/{job_uid}", {**jst, "rep": replicas})
        st: State = {
            "n": pod.name,
            "ns": pod.namespace,
            "j": job_uid,
            "jk": job_kind,
            "bare": bare,
            "r": pod.replica,
            "s": None,
            "e": False,
            "ph": None,
        }
        self._put(f"pod/{pod.uid}", st)
        return out + self._pod_update(kind, pod, f"pod/{pod.uid}", st)

    def _pod_update(self, kind: str, pod: PodFacts, key: str, st: State) -> list[Envelope]:
        now = self.clock()
        out: list[Envelope] = []
        st = dict(st)
        job_uid = st["j"]
        if st["s"] is None and not st["e"] and pod.scheduled_at is not None:
            out.append(
                self.factory.occupancy_started(pod, job_uid, now, self._node_flavor(pod.node))
            )
            st["s"] = pod.scheduled_at.isoformat()
            jkey = f"job/{job_uid}"
            jst = self.state.get(jkey)
            if jst is not None and not jst.get("st"):
                out.append(
                    self.factory.job_transition(st["jk"], job_uid, "started", pod.scheduled_at, now)
                )
                self._put(jkey, {**jst, "st": True})
            elif jst is None:
                # The job object is not known yet (pods and jobs arrive on separate
                # streams): remember the start so the job's first sighting emits it.
                # Otherwise whether JobStarted exists would depend on arrival timing.
                pending = self.state.get(f"jobstart/{job_uid}")
                if pending is None or pod.scheduled_at < datetime.fromisoformat(pending["at"]):
                    self._put(
                        f"jobstart/{job_uid}",
                        {"at": pod.scheduled_at.isoformat(), "jk": st["jk"]},
                    )
        started = datetime.fromisoformat(st["s"]) if st["s"] else None
        if kind == OUT_OF_SCOPE:
            if started is not None and not st["e"]:
                exact = pod.terminal and pod.finished_at is not None
                at = pod.finished_at if exact and pod.finished_at else now
                out += self._end_pod(key, st, at, "out-of-scope", not exact, now)
            self._replica_done(pod.uid, st, pod.finished_at or now)
            self._drop(key)
            return out
        if pod.terminal and not st["e"]:
            if started is not None:
                exact = pod.finished_at is not None
                at = pod.finished_at or pod.deletion_at or now
                out += self._end_pod(key, st, at, pod.end_reason, not exact, now)
            st["e"] = True
            self._replica_done(pod.uid, st, pod.finished_at or pod.deletion_at or now)
            if st.get("bare") and st.get("ph") is None:
                outcome = "succeeded" if pod.phase == "Succeeded" else "failed"
                at = pod.finished_at or now
                out.append(self.factory.job_transition("Pod", job_uid, outcome, at, now))
                st["ph"] = outcome
        if kind == DELETED:
            if started is not None and not st["e"]:
                at = pod.deletion_at or now
                out += self._end_pod(key, st, at, "deleted", True, now)
            self._replica_done(pod.uid, st, pod.finished_at or pod.deletion_at or now)
            if st.get("bare"):
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

    def _replica_done(self, pod_uid: str, st: State, at: datetime) -> None:
        """Remember when the pod of a replica slot stopped (restart detection)."""
        jkey = f"job/{st['j']}"
        jst = self.state.get(jkey)
        if jst is None:
            return
        replicas = dict(jst.get("rep") or {})
        slot = replicas.get(st.get("r", ""))
        if slot is not None and slot[0] == pod_uid and slot[1] is None:
            replicas[st["r"]] = [pod_uid, at.isoformat()]
            self._put(jkey, {**jst, "rep": replicas})

    def _end_pod(
        self,
        key: str,
        st: State,
        at: datetime,
        reason: OccupancyEndReason,
        estimated: bool,
        now: datetime,
    ) -> list[Envelope]:
        if st.get("s") is None or st.get("e"):
            return []
        uid = key.split("/", 1)[1]
        started = datetime.fromisoformat(st["s"])
        self._put(key, {**st, "e": True})
        return [
            self.factory.occupancy_ended(
                uid, st["j"], at, reason, estimated, now, started, pod_name=st.get("n") or ""
            )
        ]
