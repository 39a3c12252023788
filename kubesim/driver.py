"""Replays a trace into a running kubesim on its virtual clock.

A row that is its own job becomes a batch Job and its pod: created at the creation second,
bound at the scheduled second (never moved: the trace is the truth, so a node is picked that
fits, else the least-loaded one is overcommitted and logged), terminated and deleted at the
deletion second. A row that is a service's replica (``TraceInstance.service``: DLRM) is one
pod of an apps/v1 Deployment: the Deployment is created at its first row's creation second
with the rows created then as its replicas (rows that existed before the trace: second 0);
each later creation scales it up by one (``spec.replicas``, with a ``managedFields`` entry of
the manager ``kubesim-trace`` at that second, so the watcher's WorkloadScaled is on time) and
then creates the replica's pod (owned by the ReplicaSet ``<deployment>-<pod-template-hash>``,
asking the row's own resources); the scheduled second binds it; the deletion second
terminates and deletes the pod and then scales the Deployment down by one. So a Deployment
never has more live pods than it wants replicas, and its desired replicas over time are its
rows' lifetimes.
`speed="max"` jumps from event to event but waits while watchers are behind, so a replay
measures the system rather than overflowing it; a number runs that many times real time.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from kubesim.objects import (
    ANNOTATION_GPU_MILLI,
    ANNOTATION_TRACE,
    ANNOTATION_TRACE_NAME,
    LABEL_BILLING_MODE,
    LABEL_JOB_NAME,
    LABEL_PRIORITY,
    LABEL_USER,
    LABEL_WORKSPACE,
    bind_pod,
    job_object,
    node_object,
    pod_object,
    resource_group_of,
    terminate_pod,
)
from kubesim.resources import BATCH_JOBS, DEPLOYMENTS, NODES, PODS
from kubesim.server import KubeSim
from kubesim.services import deployment_object, replica_pod, replica_requests, template_hash
from kubesim.store import Object, StoredEvent
from kubesim.traces import Trace, TraceInstance, TraceNode

__all__ = [
    "TRACE_FIELD_MANAGER",
    "NodePlacer",
    "ServicePlan",
    "Speed",
    "TraceDriver",
    "open_loop_actions",
    "plan_services",
    "pod_names",
    "row_annotations",
    "row_labels",
]

log = logging.getLogger(__name__)

Speed = float | Literal["max"]

# within one second: Deployments, then creations, terminations, bindings, late terminations
_DEPLOY, _CREATE, _TERMINATE, _BIND, _TERMINATE_LATE = -1, 0, 1, 2, 3

#: the field manager the driver's scales of a service record (``WorkloadScaled.by``)
TRACE_FIELD_MANAGER = "kubesim-trace"


def _gated(pod: Object) -> bool:
    return bool(pod["spec"].get("schedulingGates"))


def row_labels(inst: TraceInstance) -> dict[str, str]:
    """Who pays for a row, as the watcher reads it (docs/kubesim.md, the label table)."""
    return {
        LABEL_WORKSPACE: inst.workspace,
        LABEL_BILLING_MODE: inst.billing_mode,
        LABEL_USER: inst.user,
        LABEL_PRIORITY: str(inst.priority),
    }


def row_annotations(trace_name: str, inst: TraceInstance) -> dict[str, str]:
    """A row's exact mGPU, its trace and its own name there, and the trace's annotations."""
    return {
        ANNOTATION_GPU_MILLI: str(inst.gpu_milli),
        ANNOTATION_TRACE: trace_name,
        ANNOTATION_TRACE_NAME: inst.source_name,
        **dict(inst.annotations),
    }


@dataclass(frozen=True)
class ServicePlan:
    """One service of a trace: its Deployment as the driver creates it, and when."""

    namespace: str
    name: str
    #: the second it is created: its first row's creation (0 for rows older than the trace)
    created: int
    #: its replicas then: the rows created at that second
    replicas: int
    #: the Deployment (its template: the service's first row's labels and resources)
    deployment: Object

    @cached_property
    def pod_template_hash(self) -> str:
        return template_hash(self.deployment)

    def pod_name(self, inst: TraceInstance) -> str:
        """The replica pod of ``inst``, as :func:`kubesim.services.replica_pod` names it."""
        return f"{self.name}-{self.pod_template_hash}-{inst.replica:05d}"


def plan_services(trace: Trace) -> dict[tuple[str, str], ServicePlan]:
    """``(namespace, name)`` -> the plan of every service ``trace``'s rows are replicas of."""
    rows: dict[tuple[str, str], list[TraceInstance]] = {}
    for inst in trace.instances:
        if inst.service is not None:
            rows.setdefault((inst.namespace, inst.service), []).append(inst)
    plans = {}
    for (namespace, name), replicas in rows.items():
        created = min(i.created for i in replicas)
        head = replicas[0]
        labels = row_labels(head)
        annotations = {
            ANNOTATION_GPU_MILLI: str(head.gpu_milli),
            ANNOTATION_TRACE: trace.name,
            ANNOTATION_TRACE_NAME: head.workspace,
        }
        initial = sum(1 for i in replicas if i.created == created)
        deployment = deployment_object(
            name,
            namespace,
            replicas=initial,
            labels=labels,
            annotations=annotations,
            cpu_milli=head.cpu_milli,
            memory_mib=head.memory_mib,
            gpus=head.gpus,
            priority=head.priority,
        )
        plans[(namespace, name)] = ServicePlan(namespace, name, created, initial, deployment)
    return plans


def pod_names(trace: Trace) -> dict[tuple[str, str], str]:
    """``(namespace, job_name)`` of each row -> the name of the pod the driver makes of it
    (a Job's pod, or a service's replica)."""
    services = plan_services(trace)
    return {
        (i.namespace, i.job_name): (
            i.pod_name if i.service is None else services[(i.namespace, i.service)].pod_name(i)
        )
        for i in trace.instances
    }


def open_loop_actions(index: int, inst: TraceInstance) -> list[tuple[int, int, int]]:
    """(second, kind, ``index``) of what the open loop does to one row: create it, bind it
    at its scheduled second, end it at its deletion."""
    actions = [(inst.created, _CREATE, index)]
    if inst.scheduled is not None:
        actions.append((inst.scheduled, _BIND, index))
    if inst.deleted is not None:
        late = inst.scheduled is not None and inst.deleted <= inst.scheduled
        actions.append((inst.deleted, _TERMINATE_LATE if late else _TERMINATE, index))
    return actions


@dataclass
class _NodeState:
    node: TraceNode
    gpu_used: int = 0
    cpu_used: int = 0
    mem_used: int = 0
    version: int = 0

    def load(self) -> float:
        shares = [
            self.cpu_used / self.node.cpu_milli if self.node.cpu_milli else 0.0,
            self.mem_used / self.node.memory_mib if self.node.memory_mib else 0.0,
        ]
        if self.node.gpus:
            shares.append(self.gpu_used / (self.node.gpus * 1000))
        return max(shares)

    def fits(self, gpu: int, cpu: int, mem: int) -> bool:
        return (
            self.gpu_used + gpu <= self.node.gpus * 1000
            and self.cpu_used + cpu <= self.node.cpu_milli
            and self.mem_used + mem <= self.node.memory_mib
        )


class NodePlacer:
    """Least-loaded fitting node, per node shape kept in a lazily updated heap."""

    _PROBE = 16

    def __init__(self, nodes: tuple[TraceNode, ...]) -> None:
        self.states = {n.name: _NodeState(n) for n in nodes}
        self._heaps: dict[tuple[int, int, int, str | None], list[tuple[float, str, int]]] = (
            defaultdict(list)
        )
        for state in self.states.values():
            self._push(state)
        self.overcommits = 0

    @staticmethod
    def _shape(node: TraceNode) -> tuple[int, int, int, str | None]:
        return (node.gpus, node.cpu_milli, node.memory_mib, node.gpu_model)

    def _push(self, state: _NodeState) -> None:
        heapq.heappush(
            self._heaps[self._shape(state.node)], (state.load(), state.node.name, state.version)
        )

    def _candidates(self, shape: tuple[int, int, int, str | None]) -> list[_NodeState]:
        heap = self._heaps[shape]
        taken: list[tuple[float, str, int]] = []
        found: list[_NodeState] = []
        while heap and len(found) < self._PROBE:
            entry = heapq.heappop(heap)
            state = self.states[entry[1]]
            if entry[2] != state.version:
                continue
            taken.append(entry)
            found.append(state)
        for entry in taken:
            heapq.heappush(heap, entry)
        return found

    def place(self, gpu: int, cpu: int, mem: int, models: tuple[str, ...] = ()) -> str | None:
        """Pick a node; None when there are no nodes of a usable kind at all. ``models``:
        the GPU models the pod is constrained to (the trace ran it on one of them, so
        a node of those models is overcommitted rather than another model used)."""
        if gpu:
            tiers = [[s for s in self._heaps if s[0] > 0], list(self._heaps)]
        else:
            tiers = [[s for s in self._heaps if s[0] == 0], list(self._heaps)]
        if models:
            tiers.insert(0, [s for s in self._heaps if s[3] in models])
        fallback: _NodeState | None = None
        for shapes in tiers:
            best: _NodeState | None = None
            for shape in shapes:
                for state in self._candidates(shape):
                    if fallback is None or state.load() < fallback.load():
                        fallback = state
                    if state.fits(gpu, cpu, mem):
                        if best is None or state.load() < best.load():
                            best = state
                        break
            if best is not None:
                return best.node.name
            if fallback is not None:
                break  # overcommit within the first usable tier
        if fallback is None:
            return None
        self.overcommits += 1
        log.info(
            "overcommitting node %s (no node fits gpu=%s cpu=%s mem=%s)",
            fallback.node.name,
            gpu,
            cpu,
            mem,
        )
        return fallback.node.name

    def add(self, node: str, gpu: int, cpu: int, mem: int, sign: int = 1) -> None:
        state = self.states.get(node)
        if state is None:
            return
        state.gpu_used += sign * gpu
        state.cpu_used += sign * cpu
        state.mem_used += sign * mem
        state.version += 1
        self._push(state)


class TraceDriver:
    """Plays `trace` into `sim`; `step()` applies one virtual instant, `run()` all of them.

    Construction registers the nodes and applies everything at second 0 (instances that
    existed before the trace are then present, already running, at the first LIST).
    """

    def __init__(
        self,
        sim: KubeSim,
        trace: Trace,
        speed: Speed = "max",
        *,
        max_backlog: int = 2_000,
        max_events_per_second: float | None = None,
        prime: bool = True,
    ) -> None:
        if speed != "max" and (not isinstance(speed, int | float) or speed <= 0):
            raise ValueError("speed must be 'max' or a positive number")
        self.sim = sim
        self.trace = trace
        self.speed = speed
        self.max_backlog = max_backlog
        self.max_events_per_second = max_events_per_second
        self.placer = NodePlacer(trace.nodes)
        self.done = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._by_job = {(i.namespace, i.job_name): i for i in trace.instances}
        self._pods: dict[tuple[str, str], set[str]] = defaultdict(set)
        self._placed: dict[tuple[str, str], tuple[str, int, int, int]] = {}
        self.services = self._plan_services()
        self._service_keys = list(self.services)
        self._actions = sorted(self._plan_actions())
        self._next = 0
        self.applied = 0
        sim.store.listeners.append(self._observe)
        sim.cluster.pod_scheduler = self._schedule_resumed
        with sim.store.lock:
            for node in trace.nodes:
                sim.cluster.create(
                    NODES,
                    node_object(
                        node.name,
                        gpus=node.gpus,
                        cpu_milli=node.cpu_milli,
                        memory_mib=node.memory_mib,
                        gpu_model=node.gpu_model,
                        labels={
                            "dlc.ledger/trace": trace.name,
                            # resource groups by GPU model (docs/subscriptions.md)
                            "dlc.ledger/resource-group": resource_group_of(node.gpu_model),
                        },
                    ),
                )
        if prime:
            self.run_until(0)

    def _plan_services(self) -> dict[tuple[str, str], ServicePlan]:
        """The services the driver plays (every one the trace's rows are replicas of)."""
        return plan_services(self.trace)

    def _plan_actions(self) -> list[tuple[int, int, int]]:
        """(second, kind, instance index) of every action the trace prescribes (for a
        Deployment's creation: the index of its service)."""
        actions = self._deploy_actions()
        for index, inst in enumerate(self.trace.instances):
            actions += open_loop_actions(index, inst)
        return actions

    def _deploy_actions(self) -> list[tuple[int, int, int]]:
        return [
            (self.services[key].created, _DEPLOY, index)
            for index, key in enumerate(self._service_keys)
        ]

    # -- progress --------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return self.done.is_set()

    @property
    def overcommits(self) -> int:
        return self.placer.overcommits

    def progress(self) -> tuple[float, int]:
        """(virtual seconds now, trace end second)."""
        return self.sim.clock.seconds(), self.trace.end

    def next_time(self) -> int | None:
        return self._actions[self._next][0] if self._next < len(self._actions) else None

    # -- running ---------------------------------------------------------------------------

    def step(self) -> bool:
        """Apply every action of the next virtual instant; False once the trace is over."""
        t = self.next_time()
        if t is None:
            self._finish()
            return False
        self.sim.cluster.advance_to(max(t, self.sim.clock.seconds()))
        while self._next < len(self._actions) and self._actions[self._next][0] == t:
            _, kind, index = self._actions[self._next]
            self._next += 1
            with self.sim.store.lock:  # HTTP writes (suspend, delete) interleave safely
                if kind == _DEPLOY:
                    self._deploy(self.services[self._service_keys[index]])
                else:
                    self._apply(kind, self.trace.instances[index])
            self.applied += 1
        return True

    def run_until(self, seconds: float) -> None:
        """Apply every action at or before `seconds`, then set the clock there."""
        while (t := self.next_time()) is not None and t <= seconds:
            self.step()
        self.sim.cluster.advance_to(max(seconds, self.sim.clock.seconds()))
        if self.next_time() is None and seconds >= self.trace.end:
            self._finish()

    def run(self) -> None:
        """Play to the end (blocking), paced by `speed`; `stop()` interrupts."""
        wall0, virt0 = time.monotonic(), self.sim.clock.seconds()
        applied0 = self.applied
        while not self._stop.is_set():
            t = self.next_time()
            if t is None:
                break
            if self.speed == "max":
                self._wait_for_watchers()
                if self.max_events_per_second:
                    ahead = (self.applied - applied0) / self.max_events_per_second - (
                        time.monotonic() - wall0
                    )
                    if ahead > 0:
                        self._stop.wait(ahead)
            else:
                target = virt0 + (time.monotonic() - wall0) * float(self.speed)
                if t > target:
                    self.sim.cluster.advance_to(max(target, self.sim.clock.seconds()))
                    self._stop.wait(min(0.05, (t - target) / float(self.speed)))
                    continue
            self.step()
        if not self._stop.is_set():
            self._finish()

    def start(self) -> TraceDriver:
        """Run in a background thread; watch `done` / `finished`."""
        self._thread = threading.Thread(target=self.run, name="kubesim-driver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def join(self, timeout: float | None = None) -> bool:
        return self.done.wait(timeout)

    def _finish(self) -> None:
        if not self.done.is_set():
            self.sim.cluster.advance_to(max(self.trace.end, self.sim.clock.seconds()))
            self.done.set()

    def _wait_for_watchers(self) -> None:
        while self.watchers_behind() and not self._stop.is_set():
            time.sleep(0.002)

    def watchers_behind(self) -> bool:
        """The open, non-stalled watches have more than ``max_backlog`` unsent events."""
        return self.sim.watch_backlog() > self.max_backlog

    # -- actions ---------------------------------------------------------------------------

    def _labels(self, inst: TraceInstance) -> dict[str, str]:
        return row_labels(inst)

    def _annotations(self, inst: TraceInstance) -> dict[str, str]:
        return row_annotations(self.trace.name, inst)

    def _apply(self, kind: int, inst: TraceInstance) -> None:
        if inst.service is not None:
            if kind == _CREATE:
                self._create_replica(inst)
            elif kind == _BIND:
                self._bind_replica(inst)
            else:
                self._end_replica(inst)
        elif kind == _CREATE:
            self._create(inst)
        elif kind == _BIND:
            self._bind_instance(inst)
        else:
            self._terminate(inst)

    # -- a service's replicas --------------------------------------------------------------

    def _plan_of(self, inst: TraceInstance) -> ServicePlan:
        assert inst.service is not None
        return self.services[(inst.namespace, inst.service)]

    def _deploy(self, plan: ServicePlan) -> None:
        self.sim.cluster.create(DEPLOYMENTS, plan.deployment)

    def _scale(self, plan: ServicePlan, delta: int) -> None:
        """``spec.replicas`` += ``delta`` (never below 0: a dispatcher may have scaled a
        stopped service to none), set by the trace's field manager now."""
        now = self.sim.clock.timestamp()

        def scale(deployment: Object) -> None:
            spec: dict[str, Any] = deployment["spec"]
            spec["replicas"] = max(0, int(spec.get("replicas", 0)) + delta)
            deployment["metadata"]["managedFields"] = [
                {
                    "manager": TRACE_FIELD_MANAGER,
                    "operation": "Update",
                    "apiVersion": DEPLOYMENTS.api_version,
                    "time": now,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {"f:replicas": {}}},
                }
            ]

        self.sim.cluster.update(DEPLOYMENTS, plan.namespace, plan.name, scale)

    def _create_replica(self, inst: TraceInstance) -> None:
        """One more replica: the scale (unless the Deployment was created with it), then
        its Pending pod asking the row's own resources."""
        plan = self._plan_of(inst)
        if inst.created != plan.created:
            self._scale(plan, 1)
        self.sim.cluster.create(PODS, self._replica_object(inst))

    def _replica_object(self, inst: TraceInstance) -> Object:
        """The Pending pod of ``inst``'s replica, as its ReplicaSet makes it now."""
        plan = self._plan_of(inst)
        deployment = self.sim.store.get(DEPLOYMENTS, plan.namespace, plan.name)
        pod = replica_pod(deployment, inst.replica, self.sim.clock.timestamp())
        pod["metadata"]["annotations"].update(self._annotations(inst))
        pod["spec"]["priority"] = inst.priority
        replica_requests(pod, cpu_milli=inst.cpu_milli, memory_mib=inst.memory_mib, gpus=inst.gpus)
        return pod

    def _bind_replica(self, inst: TraceInstance) -> None:
        pod = self.sim.store.find(PODS, inst.namespace, self._plan_of(inst).pod_name(inst))
        # a gated pod (made again after a preemption, closed loop) waits for its release
        if pod is not None and not pod["spec"].get("nodeName") and not _gated(pod):
            self._bind(pod, inst)

    def _end_replica(self, inst: TraceInstance) -> None:
        """The replica's pod terminated (if it ran) and deleted, then one replica fewer."""
        plan = self._plan_of(inst)
        store = self.sim.store
        name = plan.pod_name(inst)
        pod = store.find(PODS, inst.namespace, name)
        if pod is not None:
            if pod["spec"].get("nodeName") and pod["status"].get("phase") == "Running":
                now = self.sim.clock.timestamp()
                store.update(
                    PODS, inst.namespace, name, lambda p: terminate_pod(p, now, failed=inst.failed)
                )
            store.delete(PODS, inst.namespace, name)
        self._scale(plan, -1)

    # -- a row's own Job -------------------------------------------------------------------

    def _job_object(self, inst: TraceInstance) -> Object:
        """The batch Job a trace row becomes (open and closed loop alike)."""
        return job_object(
            inst.job_name,
            inst.namespace,
            labels=self._labels(inst),
            annotations=self._annotations(inst),
            cpu_milli=inst.cpu_milli,
            memory_mib=inst.memory_mib,
            gpus=inst.gpus,
            priority=inst.priority,
            gpu_models=inst.gpu_models,
        )

    def _create(self, inst: TraceInstance) -> None:
        cluster = self.sim.cluster
        now = self.sim.clock.timestamp()
        job = self._job_object(inst)
        job["status"] = {"active": 1, "startTime": now}
        created = cluster.create(BATCH_JOBS, job)
        cluster.create(PODS, pod_object(inst.pod_name, created, now))

    def _bind_instance(self, inst: TraceInstance) -> None:
        for pod_name in sorted(self._pods.get((inst.namespace, inst.job_name), ())):
            pod = self.sim.store.find(PODS, inst.namespace, pod_name)
            if pod is not None and not pod["spec"].get("nodeName"):
                self._bind(pod, inst)

    def _bind(self, pod: Object, inst: TraceInstance) -> None:
        node = self.placer.place(inst.gpu_milli, inst.cpu_milli, inst.memory_mib, inst.gpu_models)
        if node is None:
            log.warning("no node at all for %s", inst.job_name)
            return
        meta = pod["metadata"]
        now = self.sim.clock.timestamp()
        self.sim.cluster.update(
            PODS, meta["namespace"], meta["name"], lambda p: bind_pod(p, node, now)
        )
        self._placed[(meta["namespace"], meta["name"])] = (
            node,
            inst.gpu_milli,
            inst.cpu_milli,
            inst.memory_mib,
        )
        self.placer.add(node, inst.gpu_milli, inst.cpu_milli, inst.memory_mib)

    def _terminate(self, inst: TraceInstance) -> None:
        cluster = self.sim.cluster
        store = self.sim.store
        now = self.sim.clock.timestamp()
        ever_bound = inst.scheduled is not None
        for pod_name in sorted(self._pods.get((inst.namespace, inst.job_name), ())):
            pod = store.find(PODS, inst.namespace, pod_name)
            if pod is None:
                continue
            if pod["spec"].get("nodeName") and pod["status"].get("phase") == "Running":
                store.update(
                    PODS,
                    inst.namespace,
                    pod_name,
                    lambda p: terminate_pod(p, now, failed=inst.failed),
                )
            store.delete(PODS, inst.namespace, pod_name)
        job = store.find(BATCH_JOBS, inst.namespace, inst.job_name)
        if job is None:
            return
        if ever_bound:
            cluster.finish_job(inst.namespace, inst.job_name, failed=inst.failed)
        else:
            store.delete(BATCH_JOBS, inst.namespace, inst.job_name)

    # -- bookkeeping from store events -------------------------------------------------------

    def _observe(self, event: StoredEvent) -> None:
        if event.resource != PODS.key:
            return
        meta = event.obj["metadata"]
        job = (meta.get("labels") or {}).get(LABEL_JOB_NAME)
        key = (meta["namespace"], meta["name"])
        if event.type == "ADDED" and job:
            self._pods[(meta["namespace"], job)].add(meta["name"])
        elif event.type == "DELETED":
            if job:
                self._pods[(meta["namespace"], job)].discard(meta["name"])
            placed = self._placed.pop(key, None)
            if placed is not None:
                node, gpu, cpu, mem = placed
                self.placer.add(node, gpu, cpu, mem, sign=-1)

    def _schedule_resumed(self, pod: Object) -> None:
        """A resumed job's new pod binds at once if its trace row is still running."""
        meta = pod["metadata"]
        job = (meta.get("labels") or {}).get(LABEL_JOB_NAME)
        inst = self._by_job.get((meta["namespace"], job or ""))
        if inst is None or inst.scheduled is None:
            return
        now = self.sim.clock.seconds()
        if inst.scheduled <= now and (inst.deleted is None or now < inst.deleted):
            self._bind(pod, inst)
