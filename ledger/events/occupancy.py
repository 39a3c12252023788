"""Occupancy: a pod holding a node's resources, from binding to its end."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    AwareDatetime,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from ledger.bounds import (
    MAX_LABEL_VALUE,
    Bound,
)
from ledger.envelopes import EventData, event_type
from ledger.events.common import (
    BillingMode,
    CpuMilli,
    Flavor,
    LabelValue,
    MemoryMib,
    Mgpu,
    Name,
    NonNegative,
    OccupancyEndReason,
    ShortName,
)

__all__ = ["OccupancyEnded", "OccupancyStarted"]


@event_type("OccupancyStarted")
class OccupancyStarted(EventData):
    """A pod bound to a node: resources are occupied (and billable) from ``started_at``."""

    occupancy_id: str = Name
    job_uid: str = Name
    pod_uid: str = Name
    pod_name: ShortName = ""
    node: ShortName = ""
    flavor: Flavor = "gpu/any"
    mgpu: Mgpu = NonNegative
    cpu_milli: CpuMilli = NonNegative
    memory_mib: MemoryMib = NonNegative
    billing_mode: BillingMode = "public"
    workspace: LabelValue = Name
    quota: Annotated[str | None, Bound(MAX_LABEL_VALUE)] = None
    user: LabelValue = "unknown"
    started_at: AwareDatetime


@event_type("OccupancyEnded")
class OccupancyEnded(EventData):
    occupancy_id: str = Name
    job_uid: str = Name
    pod_uid: str = Name
    ended_at: AwareDatetime
    reason: OccupancyEndReason = "completed"
    estimated: bool = False
    #: the pod's name, for timelines; optional and left out of the payload when unknown,
    #: so events recorded before it existed keep their exact bytes
    pod_name: ShortName = ""

    @model_serializer(mode="wrap")
    def _without_empty_name(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not data.get("pod_name"):
            data.pop("pod_name", None)
        return data
