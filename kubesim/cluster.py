"""Cluster behaviour on top of the store: graceful deletion in virtual time, and the small
part of the Job / training-operator controllers that suspend and resume rely on, with the
job timeout (``activeDeadlineSeconds``, counted from ``status.startTime``, which a resume
resets): past it the job's pods are deleted and the job fails ``DeadlineExceeded``.

Both the HTTP front end and the trace driver go through this class, so a DELETE from the
dispatcher and a deletion from the trace produce the same events.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from kubesim.clock import VirtualClock, format_time, parse_time
from kubesim.objects import mark_job_finished, pod_object, terminate_pod
from kubesim.resources import BATCH_JOBS, MPIJOBS, PODS, PYTORCHJOBS, TFJOBS, ResourceType
from kubesim.store import Object, Store

__all__ = ["Cluster", "active_deadline", "suspend_flag"]

log = logging.getLogger(__name__)

_KUBEFLOW = (PYTORCHJOBS, TFJOBS, MPIJOBS)


def suspend_flag(res: ResourceType, obj: Object | None) -> bool:
    """Whether a Job (spec.suspend) or a Kubeflow job (spec.runPolicy.suspend) is suspended."""
    if obj is None:
        return False
    spec = obj.get("spec") or {}
    if res == BATCH_JOBS:
        return bool(spec.get("suspend"))
    if res in _KUBEFLOW:
        return bool((spec.get("runPolicy") or {}).get("suspend"))
    return False


def active_deadline(res: ResourceType, obj: Object | None) -> int | None:
    """A Job's ``spec.activeDeadlineSeconds`` (Kubeflow: ``spec.runPolicy``'s), None unset."""
    spec = (obj or {}).get("spec") or {}
    if res == BATCH_JOBS:
        value = spec.get("activeDeadlineSeconds")
    elif res in _KUBEFLOW:
        value = (spec.get("runPolicy") or {}).get("activeDeadlineSeconds")
    else:
        return None
    return None if value is None else int(value)


def _gated(pod: Object | None) -> bool:
    """A pod held by a scheduling gate (``spec.schedulingGates``): no scheduler binds it."""
    return bool(((pod or {}).get("spec") or {}).get("schedulingGates"))


def _bound(pod: Object | None) -> bool:
    return bool(((pod or {}).get("spec") or {}).get("nodeName"))


class Cluster:
    """Store + virtual clock + timers; the write operations with Kubernetes side effects."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.clock: VirtualClock = store.clock
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._lock = threading.RLock()
        # Called with a freshly created Pending pod the job controller made (on resume),
        # or a Pending pod whose last scheduling gate was lifted (an admitted replica);
        # the trace driver installs one that binds it at the current virtual time.
        self.pod_scheduler: Callable[[Object], None] | None = None
        # Called with a job the controller failed by itself (its deadline passed); the
        # closed-loop driver installs one that records the job's end.
        self.job_failed: Callable[[Object], None] | None = None

    # -- virtual time ----------------------------------------------------------------------

    def schedule(self, due: float, action: Callable[[], None]) -> None:
        with self._lock:
            heapq.heappush(self._timers, (due, next(self._seq), action))

    def next_timer(self) -> float | None:
        with self._lock:
            return self._timers[0][0] if self._timers else None

    def advance_to(self, seconds: float) -> None:
        """Move virtual time forward, firing due timers at their own instants on the way."""
        while True:
            with self._lock:
                if not self._timers or self._timers[0][0] > seconds:
                    break
                due, _, action = heapq.heappop(self._timers)
            if due > self.clock.seconds():
                self.clock.set(due)
            action()
        if seconds > self.clock.seconds():
            self.clock.set(seconds)

    def advance(self, delta: float) -> None:
        self.advance_to(self.clock.seconds() + delta)

    # -- writes ----------------------------------------------------------------------------

    def create(self, res: ResourceType, obj: Object) -> Object:
        return self.store.create(res, obj)

    def update(
        self,
        res: ResourceType,
        namespace: str,
        name: str,
        mutate: Callable[[Object], Object | None],
    ) -> Object:
        """Store a change and let the controllers react to it (suspend / resume)."""
        with self.store.lock:
            old, new = self.store.update(res, namespace, name, mutate)
            if res == PODS and _gated(old) and not _gated(new) and not _bound(new):
                # its last scheduling gate lifted (the dispatcher admitted the replica):
                # schedulable now, as a resumed job's new pod is
                if self.pod_scheduler is not None:
                    self.pod_scheduler(new)
            elif suspend_flag(res, old) != suspend_flag(res, new):
                self._on_suspend_changed(res, new, suspend_flag(res, new))
            elif active_deadline(res, old) != active_deadline(res, new):
                self._watch_deadline(res, namespace, name)
            return self.store.get(res, namespace, name)

    def delete(
        self,
        res: ResourceType,
        namespace: str,
        name: str,
        grace_seconds: int | None = None,
        propagation: str | None = None,
    ) -> Object:
        """DELETE semantics: graceful for bound, running pods; immediate otherwise."""
        with self.store.lock:
            obj = self.store.get(res, namespace, name)
            if res == PODS:
                return self._delete_pod(obj, grace_seconds)
            body = self.store.delete(res, namespace, name)
            if propagation in ("Background", "Foreground"):
                uid = body["metadata"]["uid"]
                for pod in list(self.store.iter_owned(PODS, uid)):
                    meta = pod["metadata"]
                    if not meta.get("deletionTimestamp"):
                        self._delete_pod(pod, None)
            return body

    def _delete_pod(self, pod: Object, grace_seconds: int | None) -> Object:
        meta = pod["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        if grace_seconds is None:
            grace_seconds = int(pod.get("spec", {}).get("terminationGracePeriodSeconds", 30))
        phase = pod.get("status", {}).get("phase")
        running = bool(pod.get("spec", {}).get("nodeName")) and phase not in ("Succeeded", "Failed")
        if grace_seconds <= 0 or not running:
            return self.store.delete(PODS, namespace, name)
        now = self.clock.seconds()
        due = now + grace_seconds
        # A second DELETE may only shorten the grace period, as in Kubernetes.
        if meta.get("deletionTimestamp") and self._seconds_of(meta["deletionTimestamp"]) <= due:
            return pod
        deadline = format_time(self.clock.at(due))

        def mark(p: Object) -> None:
            p["metadata"]["deletionTimestamp"] = deadline
            p["metadata"]["deletionGracePeriodSeconds"] = grace_seconds

        self.store.update(PODS, namespace, name, mark)
        uid = meta["uid"]
        self.schedule(due, lambda: self._finish_graceful(namespace, name, uid))
        return self.store.get(PODS, namespace, name)

    def _seconds_of(self, stamp: str) -> float:
        return (parse_time(stamp) - self.clock.epoch) / timedelta(seconds=1)

    def _finish_graceful(self, namespace: str, name: str, uid: str) -> None:
        """The kubelet killed the containers (SIGTERM, exit 143); then the object goes."""
        with self.store.lock:
            pod = self.store.find(PODS, namespace, name)
            if pod is None or pod["metadata"]["uid"] != uid:
                return
            if not pod["metadata"].get("deletionTimestamp"):
                return
            now = self.clock.timestamp()
            if pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
                self.store.update(
                    PODS,
                    namespace,
                    name,
                    lambda p: terminate_pod(p, now, failed=True, exit_code=143),
                )
            self.store.delete(PODS, namespace, name)

    # -- controllers -----------------------------------------------------------------------

    def _on_suspend_changed(self, res: ResourceType, job: Object, suspended: bool) -> None:
        meta = job["metadata"]
        now = self.clock.timestamp()
        if suspended:
            for pod in list(self.store.iter_owned(PODS, meta["uid"])):
                if not pod["metadata"].get("deletionTimestamp"):
                    self._delete_pod(pod, None)
        else:
            if res == BATCH_JOBS and not self._finished(job):
                self._spawn_pod(job)

        def set_status(j: Object) -> None:
            status = j.setdefault("status", {})
            conds = [c for c in status.get("conditions", []) if c.get("type") != "Suspended"]
            conds.append(
                {
                    "type": "Suspended",
                    "status": "True" if suspended else "False",
                    "reason": "JobSuspended" if suspended else "JobResumed",
                    "lastTransitionTime": now,
                    "lastProbeTime": now,
                }
            )
            status["conditions"] = conds
            if res == BATCH_JOBS:
                status["active"] = 0 if suspended else 1
            # the deadline's clock restarts on resume, as the Job controller resets it
            if suspended:
                status.pop("startTime", None)
            else:
                status["startTime"] = now

        self.store.update(res, meta["namespace"], meta["name"], set_status)
        if not suspended:
            self._watch_deadline(res, meta["namespace"], meta["name"])

    def _watch_deadline(self, res: ResourceType, namespace: str, name: str) -> None:
        """Fail the job now if it has been active past its deadline, else check again then."""
        job = self.store.find(res, namespace, name)
        if job is None or suspend_flag(res, job) or self._finished(job):
            return
        deadline = active_deadline(res, job)
        started = (job.get("status") or {}).get("startTime")
        if deadline is None or not started:
            return
        due = self._seconds_of(started) + deadline
        if due > self.clock.seconds():
            uid = job["metadata"]["uid"]
            self.schedule(due, lambda: self._deadline_due(res, namespace, name, uid))
            return
        for pod in list(self.store.iter_owned(PODS, job["metadata"]["uid"])):
            if not pod["metadata"].get("deletionTimestamp"):
                self._delete_pod(pod, None)
        now = self.clock.timestamp()
        self.store.update(
            res,
            namespace,
            name,
            lambda j: mark_job_finished(j, now, failed=True, reason="DeadlineExceeded"),
        )
        if self.job_failed is not None:
            self.job_failed(self.store.get(res, namespace, name))

    def _deadline_due(self, res: ResourceType, namespace: str, name: str, uid: str) -> None:
        with self.store.lock:
            job = self.store.find(res, namespace, name)
            if job is not None and job["metadata"]["uid"] == uid:
                self._watch_deadline(res, namespace, name)

    @staticmethod
    def _finished(job: Object) -> bool:
        conds = job.get("status", {}).get("conditions", [])
        return any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conds)

    def _spawn_pod(self, job: Object) -> Object:
        meta = job["metadata"]
        digest = hashlib.sha256(f"{meta['uid']}/{self.store.resource_version}".encode()).hexdigest()
        pod = self.store.create(
            PODS, pod_object(f"{meta['name']}-{digest[:5]}", job, self.clock.timestamp())
        )
        if self.pod_scheduler is not None:
            self.pod_scheduler(pod)
        return pod

    def finish_job(self, namespace: str, name: str, *, failed: bool) -> None:
        now = self.clock.timestamp()
        if self.store.find(BATCH_JOBS, namespace, name) is None:
            return
        self.store.update(
            BATCH_JOBS, namespace, name, lambda j: mark_job_finished(j, now, failed=failed)
        )

    def owned_pods(self, owner_uid: str) -> list[Object]:
        return list(self.store.iter_owned(PODS, owner_uid))

    def info(self) -> dict[str, Any]:
        return {
            "resourceVersion": self.store.resource_version,
            "virtualSeconds": self.clock.seconds(),
        }
