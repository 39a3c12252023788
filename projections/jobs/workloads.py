"""A service's or notebook's desired replicas over time (docs/workloads.md), read from its own
stream: its creation, every scale and its deletion, in cluster-time order."""

from __future__ import annotations

from typing import Any

from ledger.canonical import format_timestamp
from ledger.store.base import UnitOfWork
from projections.jobs.fold import fold_order

__all__ = ["replica_history"]

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
