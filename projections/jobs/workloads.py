"""A service or notebook as its reads show it (docs/workloads.md): its job detail with its desired
replicas over time, read from its own stream (creation, every scale, deletion, in cluster-time
order); the one read ``services show`` and ``/v1/services/{service_uid}`` both call."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from ledger.canonical import format_timestamp
from ledger.errors import NotFound
from ledger.events import WORKLOAD_KINDS
from ledger.store.base import UnitOfWork
from projections.jobs.fold import fold_order
from projections.jobs.queries import find_job, job_detail

__all__ = ["occupied_history", "replica_history", "workload_detail"]

_CHANGES = ("WorkloadCreated", "WorkloadScaled", "WorkloadDeleted")


def replica_history(uow: UnitOfWork, uid: str) -> list[dict[str, Any]]:
    """``[{at, change, replicas, by}]``: the desired replicas from each change on (a deletion
    leaves none); empty for a training job."""
    stored = [
        e
        for e in uow.read_streams([f"job/{uid}"], before=uow.head_position() + 1)
        if e.type in _CHANGES
    ]
    stored.sort(key=lambda e: fold_order(e.occurred_at, e.type, e.position))
    out: list[dict[str, Any]] = []
    for event in stored:
        data = event.data
        if event.type == "WorkloadCreated":
            change, replicas, by = "created", data.get("replicas", 1), data.get("user")
        elif event.type == "WorkloadScaled":
            change, replicas, by = "scaled", data.get("to_replicas", 0), data.get("by")
        else:
            change, replicas, by = "deleted", 0, None
        out.append(
            {
                "at": format_timestamp(event.occurred_at),
                "change": change,
                "replicas": replicas,
                "by": by,
            }
        )
    return out


def workload_detail(
    uow: UnitOfWork, ref: str, *, workspaces: Collection[str] | None = None
) -> dict[str, Any]:
    """The service or notebook ``ref`` (uid, or a name only one job has) as :func:`job_detail`
    shows a job, with its ``replica_history``; a training job is :class:`NotFound` here."""
    uid = find_job(uow.connection, ref, workspaces=workspaces)
    detail = job_detail(uow, uid, workspaces=workspaces)
    if detail.get("framework") not in WORKLOAD_KINDS:
        raise NotFound(f"{ref!r} is a training job, not a service: see its job (`jobs show`)")
    detail["replica_history"] = replica_history(uow, uid)
    detail["occupied_history"] = occupied_history(detail["timeline"])
    return detail


def occupied_history(timeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``[{at, pods}]``: the pods occupying from each instant on, counted from ``timeline``
    (the detail's, in cluster-time order): its ``OccupancyStarted`` (+1) and
    ``OccupancyEnded`` (-1), netted per instant; a point where the count changes. An end
    whose start is not in the timeline counts for nothing (never below 0)."""
    steps = {"OccupancyStarted": 1, "OccupancyEnded": -1}
    deltas: dict[str, int] = {}  # per instant, in the timeline's order
    for entry in timeline:
        step = steps.get(entry["type"])
        if step is not None:
            at = str(entry["occurred_at"])
            deltas[at] = deltas.get(at, 0) + step
    out: list[dict[str, Any]] = []
    pods = 0
    for at, delta in deltas.items():
        pods = max(0, pods + delta)
        if not out or out[-1]["pods"] != pods:
            out.append({"at": at, "pods": pods})
    return out
