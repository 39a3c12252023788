"""Closed-loop trace replay: the trace says when jobs arrive and how long they run, a
dispatcher outside kubesim decides when they start.

Open-loop replay (:class:`~kubesim.driver.TraceDriver`) binds every pod at the trace's
scheduled second. Here each row's batch Job is created *suspended* at its creation second
(``spec.suspend: true``, condition ``Suspended=True``, no pod) and runs only once something
resumes it (``spec.suspend: false`` over the API): the Job controller (:mod:`kubesim.cluster`)
spawns a pod, this driver binds it at once and lets it run for the row's run length
(deleted - scheduled), then terminates it Succeeded or Failed as the trace says and marks the
Job Complete or Failed. Suspended again while running (a preemption), the controller deletes
the pod (graceful, in virtual time); the next resume starts the FULL run length again: the
work since the last start is lost, as for a training job without checkpoints.

A job that declares a maximum run time (annotation ``dlc.ledger/max-run-seconds``, from the
row's annotations) is due for a stop at its start + that maximum: :meth:`next_instant` says
so, so the lockstep loop runs a dispatcher cycle then; the dispatcher stops it by setting
its ``activeDeadlineSeconds``, the Job controller fails it ``DeadlineExceeded`` and it ends
``Failed`` here (``timed_out``), never queued again.

A service's row (``TraceInstance.service``: DLRM's instances) is a replica of its Deployment,
as in the open loop (:mod:`kubesim.driver`: the Deployment created at its first row, scaled
up by one at each later row's creation), but its pod is created with the admission gate
``dlc.ledger/admission`` and not bound: the dispatcher admits the replica by lifting the gate
(docs/dispatch.md, "Services and notebooks"); the pod is then bound at once and runs the
row's run length, after which the driver terminates and deletes it and scales the
Deployment down by one. A row the trace never scheduled is withdrawn at its deletion (its
pod deleted, gated or not, one replica fewer). A replica pod the dispatcher deletes as
preempted (marked ``dlc.ledger/preempted-by``) is made again, gated, at that instant, as its
ReplicaSet would (kubesim runs no Deployment controller); released again, it runs the FULL
run length again; its :class:`JobRun` counts the preemption. A pre-existing row's replica is
created released and bound at once (adopted).

Rows the trace never scheduled are withdrawn (pods and Job deleted) at their deletion second,
running or not: their user gave up. Rows still running at the trace's end run their observed
length (end - scheduled) and then succeed. Rows the trace marks pre-existing (running before
the trace began, DLRM) are adopted: created unsuspended and bound at once, as workloads a
dispatcher finds already admitted; they can be preempted like any other.

History, then live (``open_until``, trace seconds): rows created before it play exactly as
the open loop plays them (:class:`~kubesim.driver.TraceDriver`: created unsuspended, bound at
their scheduled second, ended at their deletion, a service's replicas as its Deployment's
pods), whatever the dispatcher does; rows created at or after it arrive suspended (a
service's: gated), as above; a service may have rows on both sides (one Deployment).
A history row still running at ``open_until`` runs on to its own deletion (a row the trace
never ended: for ever, as in the open loop). The dispatcher may preempt one (it occupies
the quota tree like any admitted job): resumed, it binds at once if its trace row has not
ended yet and still ends at its trace deletion; its deletion coming while it waits ends the
Job as the trace says (a history replica preempted comes back gated, and once released is
bound if its row has not ended; its trace deletion removes it, gated or not). Only the live
rows are closed-loop jobs (:attr:`runs`,
:attr:`finished`). :meth:`play_history` plays the history fast, waiting while the watchers
are behind (as ``TraceDriver.run`` does), so no watch falls out of the history window.

Lockstep: nothing runs on a thread. The caller moves virtual time with :meth:`run_until`
and acts between steps; :meth:`next_instant` says when something will next happen by itself
(an arrival, a withdrawal, a run's end, a grace period's end), :attr:`finished` whether every
job has ended.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from kubesim.driver import (
    _CREATE,
    _DEPLOY,
    _TERMINATE,
    ServicePlan,
    TraceDriver,
    open_loop_actions,
    plan_services,
)
from kubesim.objects import (
    ANNOTATION_MAX_RUN,
    ANNOTATION_PREEMPTED,
    SCHEDULING_GATE,
    pod_object,
    terminate_pod,
)
from kubesim.resources import BATCH_JOBS, PODS
from kubesim.server import KubeSim
from kubesim.store import Object, StoredEvent
from kubesim.traces import Trace, TraceInstance

__all__ = ["ClosedLoopDriver", "JobRun", "run_length"]

log = logging.getLogger(__name__)


def run_length(inst: TraceInstance, end: int) -> int | None:
    """Seconds the row ran in the trace (deleted - scheduled; to ``end`` when it never
    ended); None for a row the trace never scheduled."""
    if inst.scheduled is None:
        return None
    stop = inst.deleted if inst.deleted is not None else end
    return max(0, stop - inst.scheduled)


def _last_second(trace: Trace) -> int:
    """The slice's own end: its last creation, start or deletion."""
    seconds = [0]
    for inst in trace.instances:
        seconds += [inst.created, inst.scheduled or 0, inst.deleted or 0]
    return max(seconds)


@dataclass
class JobRun:
    """What the closed loop did to one job: starts, preemptions, how it ended."""

    starts: int = 0
    preemptions: int = 0
    ended: str | None = None  # "Succeeded" | "Failed" | "Withdrawn"
    ended_at: float | None = None
    #: failed by its deadline: the dispatcher stopped it at its maximum run time
    timed_out: bool = False


class ClosedLoopDriver(TraceDriver):
    """Plays ``trace`` with every job created suspended; see the module docstring.

    ``end`` (default: the last creation or withdrawal of the trace's rows, not the full
    trace's end, so a ``head()`` slice ends when its jobs do) is where rows that never ended
    stop running. ``open_until`` (trace seconds; None: no history): rows created before it
    play open loop, the others closed loop (module docstring); ``max_backlog`` paces
    :meth:`play_history`.
    """

    def __init__(
        self,
        sim: KubeSim,
        trace: Trace,
        *,
        end: int | None = None,
        open_until: int | None = None,
        max_backlog: int = 2_000,
    ) -> None:
        self.open_until = open_until
        self.runs: dict[tuple[str, str], JobRun] = {
            (i.namespace, i.job_name): JobRun() for i in trace.instances if not self.is_history(i)
        }
        self._pod_uids: dict[tuple[str, str], str] = {}
        #: (namespace, pod name) -> the service row whose replica it is (set by _plan_services)
        self._replicas: dict[tuple[str, str], TraceInstance] = {}
        self.end = end if end is not None else _last_second(trace)
        self._last_history: int | None = None  # position of the history's last action
        super().__init__(sim, trace, "max", max_backlog=max_backlog, prime=True)
        sim.cluster.job_failed = self._failed_by_controller

    # -- plan and progress -----------------------------------------------------------------

    def is_history(self, inst: TraceInstance) -> bool:
        """The row plays open loop: created before ``open_until``."""
        return self.open_until is not None and inst.created < self.open_until

    def history(self) -> Trace:
        """The trace's history rows alone (the open-loop part; empty without ``open_until``)."""
        return replace(
            self.trace, instances=tuple(i for i in self.trace.instances if self.is_history(i))
        )

    def _plan_services(self) -> dict[tuple[str, str], ServicePlan]:
        # history and live rows alike are a service's replicas (module docstring)
        plans = plan_services(self.trace)
        self._replicas = {
            (i.namespace, plans[(i.namespace, i.service)].pod_name(i)): i
            for i in self.trace.instances
            if i.service is not None
        }
        return plans

    def _plan_actions(self) -> list[tuple[int, int, int]]:
        actions = self._deploy_actions()
        for index, inst in enumerate(self.trace.instances):
            if self.is_history(inst):
                actions += open_loop_actions(index, inst)
                continue
            actions.append((inst.created, _CREATE, index))
            if inst.scheduled is None and inst.deleted is not None:
                actions.append((max(inst.deleted, inst.created), _TERMINATE, index))
        return actions

    @property
    def finished(self) -> bool:
        """Every job has ended (succeeded, failed or withdrawn), and the history has been
        played to its last action."""
        return all(run.ended is not None for run in self.runs.values()) and (
            self.open_until is None or not self._history_pending()
        )

    def _history_pending(self) -> bool:
        """Some action of the history is still to be applied."""
        if self._last_history is None:
            # a Deployment created before open_until is history (its first row is)
            self._last_history = max(
                (
                    position
                    for position, (second, kind, index) in enumerate(self._actions)
                    if (
                        self.open_until is not None and second < self.open_until
                        if kind == _DEPLOY
                        else self.is_history(self.trace.instances[index])
                    )
                ),
                default=-1,
            )
        return self._next <= self._last_history

    def unfinished(self) -> list[str]:
        return sorted(f"{ns}/{name}" for (ns, name), r in self.runs.items() if r.ended is None)

    def waiting(self) -> list[str]:
        """The unfinished jobs that are suspended now (queued: never admitted, or preempted)."""
        out = []
        for (ns, name), run in self.runs.items():
            if run.ended is not None:
                continue
            inst = self._by_job[(ns, name)]
            if inst.service is not None:
                # a replica waits gated, or made again after a preemption
                pod = self.sim.store.find(PODS, ns, self._plan_of(inst).pod_name(inst))
                if pod is None or pod["spec"].get("schedulingGates"):
                    out.append(f"{ns}/{name}")
                continue
            job = self.sim.store.find(BATCH_JOBS, ns, name)
            if job is not None and job["spec"].get("suspend"):
                out.append(f"{ns}/{name}")
        return sorted(out)

    def progress(self) -> tuple[float, int]:
        """(virtual seconds now, the slice's end); runs delayed by the dispatcher may go on
        past that end."""
        return self.sim.clock.seconds(), self.end

    def next_instant(self) -> float | None:
        """When the next thing happens by itself: an arrival or withdrawal from the trace,
        or a timer (a run's end, a grace period's end); None when nothing is due."""
        due = [t for t in (self.next_time(), self.sim.cluster.next_timer()) if t is not None]
        return min(due) if due else None

    def run_until(self, seconds: float) -> None:
        """Apply everything due at or before ``seconds`` (trace actions and timers in time
        order), then set the clock there."""
        while (t := self.next_time()) is not None and t <= seconds:
            self.step()
        self.sim.cluster.advance_to(max(seconds, self.sim.clock.seconds()))
        if self.finished and self.next_time() is None:
            self.done.set()

    def run(self) -> None:
        raise RuntimeError("a closed-loop replay moves in lockstep: call run_until()")

    def _finish(self) -> None:
        if self.finished:
            self.done.set()

    # -- actions ---------------------------------------------------------------------------

    def play_history(
        self,
        wait: Callable[[Callable[[], bool]], None] | None = None,
        after_step: Callable[[], None] | None = None,
    ) -> None:
        """Apply every action before ``open_until`` as fast as the watchers keep up: before
        each instant, while the open watches have more than ``max_backlog`` unsent events,
        wait (``wait(caught_up)``: the caller's own wait, which may time out or report;
        default: poll every 2 ms); ``after_step()`` after each instant (the caller's progress
        line, deadline). The clock stands at the history's last action then;
        ``run_until(open_until)`` moves on to the live part."""
        if self.open_until is None:
            return
        while (t := self.next_time()) is not None and t < self.open_until:
            if self.watchers_behind():
                if wait is None:
                    self._wait_for_watchers()
                else:
                    wait(lambda: not self.watchers_behind())
            self.step()
            if after_step is not None:
                after_step()

    def _apply(self, kind: int, inst: TraceInstance) -> None:
        if self.is_history(inst):
            super()._apply(kind, inst)
        elif inst.service is not None:
            if kind == _CREATE:
                self._create_gated_replica(inst)
            else:
                self._withdraw_replica(inst)
        elif kind == _CREATE:
            self._create_suspended(inst)
        else:
            self._withdraw(inst)

    def _create_suspended(self, inst: TraceInstance) -> None:
        cluster = self.sim.cluster
        now = self.sim.clock.timestamp()
        job = self._job_object(inst)
        if inst.pre_existing:
            job["status"] = {"active": 1, "startTime": now}
            created = cluster.create(BATCH_JOBS, job)
            pod = cluster.create(PODS, pod_object(inst.pod_name, created, now))
            self._schedule_resumed(pod)
            return
        job["spec"]["suspend"] = True
        job["status"] = {
            "active": 0,
            "conditions": [
                {
                    "type": "Suspended",
                    "status": "True",
                    "reason": "JobSuspended",
                    "message": "Job suspended",
                    "lastTransitionTime": now,
                    "lastProbeTime": now,
                }
            ],
        }
        cluster.create(BATCH_JOBS, job)

    def _withdraw(self, inst: TraceInstance) -> None:
        """The user deleted a job the trace never ran: its pods at once, then the Job."""
        key = (inst.namespace, inst.job_name)
        run = self.runs[key]
        if run.ended is not None:
            return
        store = self.sim.store
        for pod_name in sorted(self._pods.get(key, ())):
            if store.find(PODS, inst.namespace, pod_name) is not None:
                store.delete(PODS, inst.namespace, pod_name)
        if store.find(BATCH_JOBS, inst.namespace, inst.job_name) is not None:
            store.delete(BATCH_JOBS, inst.namespace, inst.job_name)
        self._end(run, "Withdrawn")

    # -- a service's replicas ----------------------------------------------------------------

    def _create_gated_replica(self, inst: TraceInstance) -> None:
        """A live replica: the scale up (unless the Deployment was created with it), then
        its pod held by the admission gate until the dispatcher releases it (a
        pre-existing row's pod: released and bound at once, adopted)."""
        plan = self._plan_of(inst)
        if inst.created != plan.created:
            self._scale(plan, 1)
        pod = self._replica_object(inst)
        if inst.pre_existing:
            self._start_replica(self.sim.cluster.create(PODS, pod), inst)
            return
        pod["spec"]["schedulingGates"] = [{"name": SCHEDULING_GATE}]
        self.sim.cluster.create(PODS, pod)

    def _start_replica(self, pod: Object, inst: TraceInstance) -> None:
        """A live replica released: bound now, it runs the row's run length."""
        run = self.runs[(inst.namespace, inst.job_name)]
        if run.ended is not None:
            return
        self._bind(pod, inst)
        run.starts += 1
        length = run_length(inst, self.end)
        if length is None:
            return  # never scheduled in the trace: runs until withdrawn
        meta = pod["metadata"]
        name, uid = meta["name"], meta["uid"]
        self.sim.cluster.schedule(
            self.sim.clock.seconds() + length, lambda: self._complete_replica(inst, name, uid)
        )

    def _complete_replica(self, inst: TraceInstance, pod_name: str, uid: str) -> None:
        """The replica's run ends: its pod terminates as the trace says and goes, one
        replica fewer. Nothing when that pod is gone (preempted: the work is lost)."""
        with self.sim.store.lock:
            pod = self.sim.store.find(PODS, inst.namespace, pod_name)
            if pod is None or pod["metadata"]["uid"] != uid:
                return
            if pod["metadata"].get("deletionTimestamp"):
                return
            self._end_replica(inst)
            self._end(
                self.runs[(inst.namespace, inst.job_name)],
                "Failed" if inst.failed else "Succeeded",
            )

    def _withdraw_replica(self, inst: TraceInstance) -> None:
        """The trace never ran the row: at its deletion its pod goes (gated or not) and the
        Deployment scales down by one."""
        run = self.runs[(inst.namespace, inst.job_name)]
        if run.ended is not None:
            return
        self._end_replica(inst)
        self._end(run, "Withdrawn")

    def _replica_due(self, inst: TraceInstance) -> bool:
        """The row still wants its replica now: a live row not ended, a history row before
        its trace deletion."""
        if self.is_history(inst):
            return inst.deleted is None or self.sim.clock.seconds() < inst.deleted
        return self.runs[(inst.namespace, inst.job_name)].ended is None

    def _observe(self, event: StoredEvent) -> None:
        super()._observe(event)
        if event.resource != PODS.key or event.type != "DELETED":
            return
        meta = event.obj["metadata"]
        inst = self._replicas.get((meta["namespace"], meta["name"]))
        if inst is None or ANNOTATION_PREEMPTED not in (meta.get("annotations") or {}):
            return
        if not self._replica_due(inst):
            return
        if not self.is_history(inst):
            self.runs[(inst.namespace, inst.job_name)].preemptions += 1
        # the ReplicaSet makes the pod again (not from inside the store's event): a timer
        # at this instant, which the lockstep loop's next step fires
        self.sim.cluster.schedule(self.sim.clock.seconds(), lambda: self._remake_replica(inst))

    def _remake_replica(self, inst: TraceInstance) -> None:
        """A preempted replica's pod made again, gated: its run starts over once released."""
        with self.sim.store.lock:
            if not self._replica_due(inst):
                return
            pod = self._replica_object(inst)
            if self.sim.store.find(PODS, inst.namespace, pod["metadata"]["name"]) is not None:
                return
            pod["spec"]["schedulingGates"] = [{"name": SCHEDULING_GATE}]
            self.sim.cluster.create(PODS, pod)

    def _failed_by_controller(self, job: Object) -> None:
        """The Job controller failed a job past its deadline (the dispatcher's stop at its
        maximum run time): it has ended, its running pod's work is lost."""
        meta = job["metadata"]
        run = self.runs.get((meta["namespace"], meta["name"]))
        if run is not None and run.ended is None:
            run.timed_out = True
            self._end(run, "Failed")

    def _end(self, run: JobRun, how: str) -> None:
        run.ended, run.ended_at = how, self.sim.clock.seconds()
        if self.finished and self.next_time() is None:
            self.done.set()

    # -- the job controller's new pod ------------------------------------------------------

    def _schedule_resumed(self, pod: Object) -> None:
        """Bind a resumed job's new pod now and schedule the end of its run."""
        meta = pod["metadata"]
        replica = self._replicas.get((meta["namespace"], meta["name"]))
        if replica is not None:  # a replica whose admission gate was lifted
            if not self.is_history(replica):
                self._start_replica(pod, replica)
                return
            now = self.sim.clock.seconds()
            scheduled = replica.scheduled
            if scheduled is not None and scheduled <= now and self._replica_due(replica):
                self._bind(pod, replica)  # a preempted history replica: as a history job
            return
        job = (meta.get("labels") or {}).get("job-name") or ""
        key = (meta["namespace"], job)
        if key not in self.runs:  # a history row (or no row): as the open loop
            super()._schedule_resumed(pod)
            return
        inst = self._by_job.get(key)
        if inst is None or self.runs[key].ended is not None:
            return
        self._bind(pod, inst)
        run = self.runs[key]
        if run.starts:
            run.preemptions += 1
        run.starts += 1
        limit = dict(inst.annotations).get(ANNOTATION_MAX_RUN, "")
        if limit.isdigit() and int(limit) > 0:
            # nothing happens then by itself: a timer, so the lockstep loop's next instant
            # is the one the dispatcher stops the job at
            self.sim.cluster.schedule(self.sim.clock.seconds() + int(limit), lambda: None)
        length = run_length(inst, self.end)
        if length is None:
            return  # never scheduled in the trace: runs until withdrawn
        uid = meta["uid"]
        self._pod_uids[key] = uid
        self.sim.cluster.schedule(
            self.sim.clock.seconds() + length,
            lambda: self._complete(inst, meta["name"], uid),
        )

    def _complete(self, inst: TraceInstance, pod_name: str, uid: str) -> None:
        """The run's end: the pod terminates as the trace says, the Job finishes. Nothing
        when the pod is gone or being deleted (preempted: the work is lost)."""
        store = self.sim.store
        with store.lock:
            pod = store.find(PODS, inst.namespace, pod_name)
            if pod is None or pod["metadata"]["uid"] != uid:
                return
            if pod["metadata"].get("deletionTimestamp"):
                return
            now = self.sim.clock.timestamp()
            store.update(
                PODS, inst.namespace, pod_name, lambda p: terminate_pod(p, now, failed=inst.failed)
            )
            store.delete(PODS, inst.namespace, pod_name)
            self.sim.cluster.finish_job(inst.namespace, inst.job_name, failed=inst.failed)
            self._end(
                self.runs[(inst.namespace, inst.job_name)],
                "Failed" if inst.failed else "Succeeded",
            )
