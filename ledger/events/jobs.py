"""Jobs' lifecycle: submitted, then each transition (queued, admitted, started, ... deleted)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    Field,
    PositiveInt,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from ledger.bounds import (
    MAX_LABEL_VALUE,
    MAX_NAME,
    MAX_REPLICA_SPECS,
    MAX_REPLICAS,
    Bound,
)
from ledger.envelopes import EventData, event_type
from ledger.events.common import (
    MAX_RUN_SECONDS,
    BillingMode,
    CpuMilli,
    Flavor,
    LabelValue,
    MemoryMib,
    Mgpu,
    Name,
    NonNegative,
    Part,
    Priority,
    drop_none,
)

__all__ = [
    "JOB_LIFECYCLE_TYPES",
    "JobAdmitted",
    "JobDeleted",
    "JobFailed",
    "JobPreempted",
    "JobQueued",
    "JobRestarted",
    "JobStarted",
    "JobStopped",
    "JobSubmitted",
    "JobSucceeded",
    "JobTransition",
    "ReplicaSpec",
]


class ReplicaSpec(Part):
    replica_type: LabelValue = "worker"
    count: Annotated[int, Bound(MAX_REPLICAS)] = Field(default=1, ge=0)
    flavor: Flavor = "gpu/any"
    mgpu: Mgpu = NonNegative
    cpu_milli: CpuMilli = NonNegative
    memory_mib: MemoryMib = NonNegative


@event_type("JobSubmitted")
class JobSubmitted(EventData):
    job_uid: str = Name
    name: str = Name
    namespace: LabelValue = "default"
    kind: LabelValue = "Job"
    framework: LabelValue = "none"
    workspace: LabelValue = Name
    quota: Annotated[str | None, Bound(MAX_LABEL_VALUE)] = None
    user: LabelValue = "unknown"
    priority: Priority = 0
    billing_mode: BillingMode = "public"
    replicas: Annotated[tuple[ReplicaSpec, ...], Bound(items=MAX_REPLICA_SPECS)] = ()
    #: the job's declared maximum run time (annotation ``dlc.ledger/max-run-seconds``, the
    #: platform's job timeout): the dispatcher stops it there; left out of the payload when
    #: unset, so jobs submitted before it hash as they did
    max_run_seconds: Annotated[PositiveInt | None, Bound(MAX_RUN_SECONDS, 1)] = None

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        return drop_none(handler, self, "max_run_seconds")


class JobTransition(EventData):
    """A lifecycle step of a job; ``by`` is who or what caused it, ``reason`` why."""

    job_uid: str = Name
    by: Annotated[str | None, Bound(MAX_NAME)] = None
    reason: str | None = None


@event_type("JobQueued")
class JobQueued(JobTransition):
    pass


@event_type("JobAdmitted")
class JobAdmitted(JobTransition):
    pass


@event_type("JobStarted")
class JobStarted(JobTransition):
    pass


@event_type("JobRestarted")
class JobRestarted(JobTransition):
    pass


@event_type("JobPreempted")
class JobPreempted(JobTransition):
    pass


@event_type("JobSucceeded")
class JobSucceeded(JobTransition):
    pass


@event_type("JobFailed")
class JobFailed(JobTransition):
    pass


@event_type("JobStopped")
class JobStopped(JobTransition):
    pass


@event_type("JobDeleted")
class JobDeleted(JobTransition):
    pass


#: Every job lifecycle event type (JobSubmitted and the transitions), for read models
#: that fold a job's life.
JOB_LIFECYCLE_TYPES: frozenset[str] = frozenset(
    {
        "JobSubmitted",
        "JobQueued",
        "JobAdmitted",
        "JobStarted",
        "JobRestarted",
        "JobPreempted",
        "JobSucceeded",
        "JobFailed",
        "JobStopped",
        "JobDeleted",
    }
)
