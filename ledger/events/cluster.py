"""Cluster facts: nodes registered, cordoned, removed."""

from __future__ import annotations

from typing import Annotated

from ledger.bounds import (
    MAX_NODE_GPUS,
    MAX_NODE_MEMORY_MIB,
    Bound,
)
from ledger.envelopes import EventData, event_type
from ledger.events.common import (
    CpuMilli,
    Flavor,
    LabelValue,
    Name,
    NodeBillingMode,
    NonNegative,
)

__all__ = ["NodeCordoned", "NodeRegistered", "NodeRemoved"]


@event_type("NodeRegistered")
class NodeRegistered(EventData):
    node: str = Name
    pool: LabelValue = "default"
    resource_group: LabelValue = "default"
    flavor: Flavor = "gpu/any"
    gpus: Annotated[int, Bound(MAX_NODE_GPUS)] = NonNegative
    cpu_milli: CpuMilli = NonNegative
    memory_mib: Annotated[int, Bound(MAX_NODE_MEMORY_MIB)] = NonNegative
    billing_mode: NodeBillingMode = "public"


@event_type("NodeCordoned")
class NodeCordoned(EventData):
    node: str = Name
    cordoned: bool = True


@event_type("NodeRemoved")
class NodeRemoved(EventData):
    node: str = Name
