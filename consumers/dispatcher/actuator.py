"""The narrow port the live dispatcher acts through, and the job it acts on.

The loop stores a decision first, then asks an :class:`Actuator` to carry it out; the
Kubernetes adapter is :mod:`consumers.dispatcher.kube_actuator`, tests and the replay
may bring their own. Every call is idempotent: the loop repeats it each cycle until the
watched state confirms it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["ActuationError", "Actuator", "JobRef"]


@dataclass(frozen=True)
class JobRef:
    """A job's identity on the cluster (``job_state``'s uid, namespace, name, kind)."""

    uid: str
    namespace: str
    name: str
    kind: str


class ActuationError(RuntimeError):
    """The cluster refused or failed a call; the loop retries it next cycle. ``transient``:
    the API server failed (throttled, 5xx, unreachable) rather than refused this call,
    so the cycle's other calls wait for the next cycle too."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class Actuator(Protocol):
    def resume(self, job: JobRef) -> None:
        """Let the job run (unsuspend it)."""

    def suspend(self, job: JobRef) -> None:
        """Stop the job and keep it queued (suspend it: its pods are deleted)."""

    def delete_pods(self, job: JobRef) -> None:
        """Delete the job's pods at once (an idle-mode victim's are reclaimed first)."""

    def stop(self, job: JobRef, max_run_seconds: int) -> None:
        """End the job for good, as its platform's timeout would, once it has run
        ``max_run_seconds`` (it is not queued again)."""

    def release_replicas(self, workload: JobRef, pods: int, *, shrink: bool = False) -> None:
        """Let ``pods`` of a service's or notebook's pods run: lift the admission gate
        (:data:`consumers.watchers.labels.SCHEDULING_GATE`) of gated ones, oldest first,
        while fewer are released; with ``shrink`` (a replica preempted), delete the newest
        released ones (marked preempted) while more are (its controller makes them
        again, gated)."""

    def refuse(self, workload: JobRef, reason: str) -> None:
        """Scale a service or notebook to no replica, saying why: a notebook refused at
        start, or a running workload stopped (its budget exhausted, its subscription
        released)."""
