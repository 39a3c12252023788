"""The documents of ``/v1/services`` and ``/v1/notebooks`` (docs/workloads.md): a workload is a
job row (``/v1/jobs``'s shape) with its desired replicas over time."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dlc_ledger.api.models import Freshness, JobDetail, ListedJob, Strict, Timestamp

__all__ = ["OccupiedChange", "ReplicaBilled", "ReplicaChange", "WorkloadDetail", "WorkloadPage"]


class ReplicaChange(Strict):
    """A change of the desired replicas: created, scaled, deleted (0 from then on)."""

    at: Timestamp
    change: Literal["created", "scaled", "deleted"]
    replicas: int = Field(ge=0)
    by: str | None = Field(
        description="Who: the creator; for a scale, the field manager the object names."
    )


class OccupiedChange(Strict):
    """The replica pods occupying resources from ``at`` on (its timeline's
    ``OccupancyStarted`` and ``OccupancyEnded``): a point where the count changes."""

    at: Timestamp
    pods: int = Field(ge=0)


class WorkloadPage(Strict):
    items: list[ListedJob]
    next_cursor: str | None = None
    freshness: Freshness | None = None


class ReplicaBilled(Strict):
    """One replica's occupancy and the billing mode billing decided when it started."""

    occupancy_id: str
    started_at: Timestamp
    ended_at: Timestamp | None = Field(description="Null: still running.")
    flavor: str
    mgpu: int
    billing_mode: str = Field(
        description="quota: prepaid, within its quota; public: pay-as-you-go, a spilled "
        "replica beyond its quota's capacity (or a workload on public resources)."
    )


class WorkloadDetail(JobDetail):
    replica_history: list[ReplicaChange]
    replicas_billed: list[ReplicaBilled]
    occupied_history: list[OccupiedChange] = Field(
        description="The pods occupying from each change on: the occupied replicas are "
        "pods / the replica's per_replica (its pods, a LeaderWorkerSet group's size)."
    )
