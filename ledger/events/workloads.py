"""Services and notebooks: workloads with replicas, beside the training jobs on one quota tree.

A training job is submitted once and runs to an outcome (``ledger.events.jobs``). An inference
service (a Deployment, StatefulSet or LeaderWorkerSet) and a notebook instance live
differently: created, scaled, updated by a rolling update, deleted, with replicas coming and
going in between. Their facts share a job's keys so everything keyed by a job's uid reads them
too: the workload's uid is its ``job_uid``, its stream ``job/<uid>``, and a replica pod's
occupancy names the workload as its job (docs/workloads.md).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from ledger.bounds import MAX_NAME, MAX_REPLICAS, Bound
from ledger.envelopes import EventData, event_type
from ledger.events.common import (
    BillingMode,
    LabelValue,
    Name,
    Priority,
    drop_none,
)
from ledger.events.jobs import ReplicaSpec

__all__ = [
    "WORKLOAD_KINDS",
    "WORKLOAD_TYPES",
    "Spillover",
    "WorkloadCreated",
    "WorkloadDeleted",
    "WorkloadKind",
    "WorkloadScaled",
    "WorkloadUpdated",
]

#: ``service``: inference (Deployment, StatefulSet, LeaderWorkerSet); ``notebook``: an
#: interactive instance. Training jobs are not workloads of this module.
WorkloadKind = Literal["service", "notebook"]
WORKLOAD_KINDS: tuple[str, ...] = ("service", "notebook")
#: Where replicas beyond the quota's capacity go: nowhere (they wait), or public resources.
Spillover = Literal["none", "public"]

Replicas = Annotated[int, Bound(MAX_REPLICAS)]
Revision = Annotated[str, Bound(MAX_NAME)]


@event_type("WorkloadCreated")
class WorkloadCreated(EventData):
    """A service or notebook seen for the first time, as its object declared it then."""

    job_uid: str = Name
    name: str = Name
    namespace: LabelValue = "default"
    workload: WorkloadKind = "service"
    #: the Kubernetes kind: Deployment, StatefulSet or LeaderWorkerSet
    kind: LabelValue = "Deployment"
    workspace: LabelValue = Name
    quota: Annotated[str | None, Bound(MAX_NAME)] = None
    user: LabelValue = "unknown"
    priority: Priority = 0
    billing_mode: BillingMode = "public"
    #: desired replicas; a replica's resources (a LeaderWorkerSet's group counts as one)
    replicas: Replicas = Field(default=1, ge=0)
    replica: ReplicaSpec
    #: the pod template's revision (a hash of it): a rolling update changes it
    revision: Revision = ""
    spillover: Spillover = "none"


@event_type("WorkloadScaled")
class WorkloadScaled(EventData):
    """The desired replicas changed from ``from_replicas`` to ``to_replicas``; ``by`` is the
    field manager that changed them, when the object says."""

    job_uid: str = Name
    from_replicas: Replicas = Field(ge=0)
    to_replicas: Replicas = Field(ge=0)
    by: Annotated[str | None, Bound(MAX_NAME)] = None

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        return drop_none(handler, self, "by")


@event_type("WorkloadUpdated")
class WorkloadUpdated(EventData):
    """A new pod template (a rolling update): its revision and a replica's resources."""

    job_uid: str = Name
    revision: Revision = Field(min_length=1)
    replica: ReplicaSpec


@event_type("WorkloadDeleted")
class WorkloadDeleted(EventData):
    job_uid: str = Name
    reason: Annotated[str | None, Bound(MAX_NAME)] = None

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        return drop_none(handler, self, "reason")


#: Every workload event type, for read models that fold a workload's life.
WORKLOAD_TYPES: frozenset[str] = frozenset(
    {"WorkloadCreated", "WorkloadScaled", "WorkloadUpdated", "WorkloadDeleted"}
)
