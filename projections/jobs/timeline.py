"""The timeline's text: which jobs an event is about, and the one-line summary of it
as seen from each, as a ``job_timeline`` row (the table's column order)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger.dispatch import unit_workload
from ledger.store.base import RecordedEvent

__all__ = ["named_jobs", "rows_elsewhere", "summary", "timeline_row"]


def _resources(mgpu: Any, cpu: Any, mem: Any) -> str:
    return f"{mgpu} mGPU, {cpu} mCPU, {mem} MiB"


def _replicas_summary(replicas: Sequence[dict[str, Any]]) -> str:
    parts = [
        f"{r.get('count', 1)} x {r.get('replica_type', 'worker')} "
        f"({_resources(r.get('mgpu', 0), r.get('cpu_milli', 0), r.get('memory_mib', 0))}"
        f" on {r.get('flavor', 'gpu/any')})"
        for r in replicas
    ]
    return ", ".join(parts) or "no replicas"


def _suffix(by: str | None, reason: str | None) -> str:
    out = f" by {by}" if by else ""
    return out + (f": {reason}" if reason else "")


_TRANSITION_TEXT = {
    "JobQueued": "queued",
    "JobAdmitted": "admitted",
    "JobStarted": "started running",
    "JobRestarted": "restarted",
    "JobPreempted": "preempted",
    "JobSucceeded": "succeeded",
    "JobFailed": "failed",
    "JobStopped": "stopped",
    "JobDeleted": "deleted",
}


def _pending_suffix(data: dict[str, Any]) -> str:
    """A pending decision's reason, place in the queue and estimated start (``jobs why``)."""
    parts = [str(data["reason"])] if data.get("reason") else []
    if data.get("position"):
        parts.append(f"position {data['position']} (tree {data.get('cohort_position')})")
    if data.get("estimated_start"):
        parts.append(f"estimated start {data['estimated_start']}")
    if data.get("estimated_start_low"):
        high = data.get("estimated_start_high") or "later"
        parts.append(f"likely {data['estimated_start_low']} to {high}")
    return f": {', '.join(parts)}" if parts else ""


def summary(kind: str, data: dict[str, Any], job_uid: str, bound_quota: str | None = None) -> str:
    """One line about ``kind`` as seen from ``job_uid``; ``bound_quota``: the quota a
    JobSubmitted (or WorkloadCreated) naming none was resolved to (its workspace's binding
    then)."""
    if kind == "JobSubmitted":
        quota = data.get("quota") or (
            f"{bound_quota} by workspace binding" if bound_quota else "none"
        )
        return (
            f"submitted {data.get('kind', 'Job')} {data.get('namespace', 'default')}/"
            f"{data.get('name')} by {data.get('user', 'unknown')} to workspace "
            f"{data.get('workspace')} (quota {quota}, {data.get('billing_mode', 'public')}, "
            f"priority {data.get('priority', 0)}): {_replicas_summary(data.get('replicas', ()))}"
        )
    if kind == "WorkloadCreated":
        quota = data.get("quota") or (
            f"{bound_quota} by workspace binding" if bound_quota else "none"
        )
        spill = ", spillover to public" if data.get("spillover") == "public" else ""
        return (
            f"created {data.get('workload', 'service')} {data.get('kind', 'Deployment')} "
            f"{data.get('namespace', 'default')}/{data.get('name')} by "
            f"{data.get('user', 'unknown')} in workspace {data.get('workspace')} (quota {quota}, "
            f"{data.get('billing_mode', 'public')}, priority {data.get('priority', 0)}{spill}): "
            f"{data.get('replicas', 1)} replicas of "
            f"{_replicas_summary([data.get('replica') or {}])}"
        )
    if kind == "WorkloadScaled":
        return (
            f"scaled from {data.get('from_replicas')} to {data.get('to_replicas')} replicas"
            + _suffix(data.get("by"), None)
        )
    if kind == "WorkloadUpdated":
        return (
            f"updated to revision {data.get('revision')}: "
            f"{_replicas_summary([data.get('replica') or {}])} per replica"
        )
    if kind == "WorkloadDeleted":
        return "deleted" + _suffix(None, data.get("reason"))
    if kind in _TRANSITION_TEXT:
        return _TRANSITION_TEXT[kind] + _suffix(data.get("by"), data.get("reason"))
    if kind == "OccupancyStarted":
        pod = data.get("pod_name") or data.get("pod_uid")
        return (
            f"pod {pod} bound to node {data.get('node') or '?'} at {data.get('started_at')}: "
            f"{_resources(data.get('mgpu'), data.get('cpu_milli'), data.get('memory_mib'))} "
            f"({data.get('flavor')}, {data.get('billing_mode')})"
        )
    if kind == "OccupancyEnded":
        estimated = ", estimated" if data.get("estimated") else ""
        pod = data.get("pod_name") or data.get("pod_uid")
        return (
            f"pod {pod} released at {data.get('ended_at')} "
            f"({data.get('reason', 'completed')}{estimated})"
        )
    if (
        kind == "AdmissionDecided"
        and data.get("outcome") == "stop"
        and "run" not in data.get("state", {})
    ):
        # a service or notebook stopped by a budget or a released subscription, or one
        # replica it ran on public resources (spillover) stopped by a budget
        replicas = data.get("state", {}).get("replicas", {})
        unit = data.get("job_uid")
        if replicas.get("spilled"):
            return (
                f"replica {unit}: stop decision: {data.get('reason')} (on public resources: "
                "its pod deleted, it waits)"
            )
        held = replicas.get("held")
        return f"stop decision: {data.get('reason')} (scaled to none, {held} replica(s) held)"
    if kind == "AdmissionDecided" and data.get("outcome") == "stop":
        run = data.get("state", {}).get("run", {})
        return (
            f"stop decision: {data.get('reason')} (ran {run.get('ran_seconds')} s, maximum "
            f"{run.get('max_run_seconds')} s)"
        )
    if kind == "AdmissionDecided":
        # a replica's decision in its workload's timeline names the replica
        unit = data.get("job_uid")
        replica = f"replica {unit}: " if unit and unit != job_uid else ""
        if data.get("outcome") == "refuse":
            return (
                f"{replica}refused at start in quota {data.get('quota')}: "
                f"{data.get('reason')} (not queued)"
            )
        if data.get("outcome") == "admit" and data.get("reason") == "Spillover":
            return (
                f"{replica}admission decision: admit on public resources, beyond quota "
                f"{data.get('quota')} (spillover)"
            )
        borrowing = ", borrowing" if data.get("borrowing") else ""
        return (
            f"{replica}admission decision: {data.get('outcome')} in quota "
            f"{data.get('quota')}{borrowing}" + _pending_suffix(data)
        )
    if kind == "PreemptionDecided":
        victims = [v.get("job_uid") for v in data.get("victims", ())]
        if data.get("preemptor") == job_uid:
            return f"preempts {len(victims)} job(s) ({', '.join(map(str, victims))}): " + str(
                data.get("reason")
            )
        return f"chosen as preemption victim for job {data.get('preemptor')}"
    return kind


def named_jobs(event: RecordedEvent) -> list[tuple[str, str | None, str | None]]:
    """(job uid, by, reason) for every job the event is about."""
    data = event.data
    found: dict[str, tuple[str | None, str | None]] = {}
    if event.stream.startswith("job/"):
        found[event.stream[4:]] = (data.get("by"), data.get("reason"))
    uid = data.get("job_uid")
    if isinstance(uid, str) and uid not in found:
        found[uid] = (data.get("by"), data.get("reason"))
    if event.type == "OccupancyEnded":
        for key in list(found):
            found[key] = (None, data.get("reason"))
    elif event.type == "AdmissionDecided":
        for key in list(found):
            found[key] = ("dispatcher", data.get("outcome"))
    elif event.type == "PreemptionDecided":
        preemptor = data.get("preemptor")
        if isinstance(preemptor, str):
            found.setdefault(preemptor, (None, data.get("reason")))
        for victim in data.get("victims", ()):
            vid = victim.get("job_uid")
            if isinstance(vid, str):
                found[vid] = (preemptor, victim.get("reason") or data.get("reason"))
    # a decision about a service's or notebook's replica (its unit, ``<uid>#<i>``) is in
    # the workload's timeline too
    for key, value in list(found.items()):
        workload = unit_workload(key)
        if workload != key:
            found.setdefault(workload, value)
    return [(uid, by, reason) for uid, (by, reason) in found.items()]


def rows_elsewhere(
    event: RecordedEvent, named: list[tuple[str, str | None, str | None]]
) -> list[tuple[Any, ...]]:
    """``job_timeline`` rows of ``event`` for the ``named`` jobs whose own stream it is not
    on (their timelines cannot find it in the store by stream)."""
    stream = event.stream
    return [
        timeline_row(event, uid, by, reason) for uid, by, reason in named if stream != f"job/{uid}"
    ]


def timeline_row(
    event: RecordedEvent, uid: str, by: Any, reason: Any, bound_quota: str | None = None
) -> tuple[Any, ...]:
    """A ``job_timeline`` row (table order): the event as seen from job ``uid``."""
    return (
        uid,
        event.position,
        event.occurred_at,
        event.type,
        summary(event.type, event.data, uid, bound_quota),
        event.source,
        by,
        reason,
        event.stream,
        event.event_id,
    )
