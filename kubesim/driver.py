"""Replays a trace into a running kubesim on its virtual clock.

Each trace row becomes a batch Job and its pod: created at the creation second, bound at the
scheduled second (never moved: the trace is the truth, so a node is picked that fits, else the
least-loaded one is overcommitted and logged), terminated and deleted at the deletion second.
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
from typing import Literal

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
from kubesim.resources import BATCH_JOBS, NODES, PODS
from kubesim.server import KubeSim
from kubesim.store import Object, StoredEvent
from kubesim.traces import Trace, TraceInstance, TraceNode

__all__ = ["NodePlacer", "Speed", "TraceDriver"]

log = logging.getLogger(__name__)

Speed = float | Literal["max"]

_CREATE, _TERMINATE, _BIND, _TERMINATE_LATE = 0, 1, 2, 3


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

    def _plan_actions(self) -> list[tuple[int, int, int]]:
        """(second, kind, instance index) of every action the trace prescribes."""
        actions: list[tuple[int, int, int]] = []
        for index, inst in enumerate(self.trace.instances):
            actions.append((inst.created, _CREATE, index))
            if inst.scheduled is not None:
                actions.append((inst.scheduled, _BIND, index))
            if inst.deleted is not None:
                late = inst.scheduled is not None and inst.deleted <= inst.scheduled
                actions.append((inst.deleted, _TERMINATE_LATE if late else _TERMINATE, index))
        return actions

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
        while self.sim.watch_backlog() > self.max_backlog and not self._stop.is_set():
            time.sleep(0.002)

    # -- actions ---------------------------------------------------------------------------

    def _labels(self, inst: TraceInstance) -> dict[str, str]:
        return {
            LABEL_WORKSPACE: inst.workspace,
            LABEL_BILLING_MODE: inst.billing_mode,
            LABEL_USER: inst.user,
            LABEL_PRIORITY: str(inst.priority),
        }

    def _annotations(self, inst: TraceInstance) -> dict[str, str]:
        return {
            ANNOTATION_GPU_MILLI: str(inst.gpu_milli),
            ANNOTATION_TRACE: self.trace.name,
            ANNOTATION_TRACE_NAME: inst.source_name,
            **dict(inst.annotations),
        }

    def _apply(self, kind: int, inst: TraceInstance) -> None:
        if kind == _CREATE:
            self._create(inst)
        elif kind == _BIND:
            self._bind_instance(inst)
        else:
            self._terminate(inst)

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
