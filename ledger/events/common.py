"""What every part of the catalogue shares: units, bounded field types, the frozen part model."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
)

from ledger.bounds import (
    MAX_CPU_MILLI,
    MAX_FLAVOR,
    MAX_LABEL_VALUE,
    MAX_MEMORY_MIB,
    MAX_MGPU,
    MAX_NAME,
    MAX_NODE_PRICE_MINOR,
    MAX_PRIORITY,
    MAX_QUOTA,
    MAX_RATE_MINOR,
    MIN_PRIORITY,
    Bound,
)

__all__ = [
    "MAX_RUN_SECONDS",
    "BillingMode",
    "CpuMilli",
    "Flavor",
    "LabelValue",
    "MemoryMib",
    "Mgpu",
    "Name",
    "NodeBillingMode",
    "NodePrice",
    "NonNegative",
    "OccupancyEndReason",
    "Part",
    "Priority",
    "QuotaAmounts",
    "RateBound",
    "ShortName",
    "drop_none",
]

BillingMode = Literal["quota", "public", "spot", "idle"]
NodeBillingMode = Literal["subscription", "public", "spot"]
OccupancyEndReason = Literal[
    "completed",
    "failed",
    "evicted",
    "preempted",
    "deleted",
    "node-lost",
    "vanished-during-relist",
    "out-of-scope",
]
Name = Field(min_length=1, max_length=253)
NonNegative = Field(ge=0)
#: A node's price per term, in currency units (bounded in minor units at the fact's scale:
#: ``ledger/bounds.py``, MAX_NODE_PRICE_MINOR).
NodePrice = Annotated[Decimal, Bound(MAX_NODE_PRICE_MINOR, scaled=True), Field(ge=0)]
#: A rate per unit-hour, in currency units (bounded in minor units at the fact's scale:
#: MAX_RATE_MINOR).
RateBound = Bound(MAX_RATE_MINOR, scaled=True)
#: the longest maximum run time a job may declare: a year (seconds)
MAX_RUN_SECONDS = 366 * 86_400

# Bounds of new facts (ledger.bounds; enforced at the wire and in make_envelope, never on
# read): a pod's quantities are at most one node's, attribution strings label values.
Mgpu = Annotated[int, Bound(MAX_MGPU)]
CpuMilli = Annotated[int, Bound(MAX_CPU_MILLI)]
MemoryMib = Annotated[int, Bound(MAX_MEMORY_MIB)]
LabelValue = Annotated[str, Bound(MAX_LABEL_VALUE)]
Flavor = Annotated[str, Bound(MAX_FLAVOR)]
ShortName = Annotated[str, Bound(MAX_NAME)]
Priority = Annotated[int, Bound(MAX_PRIORITY, MIN_PRIORITY)]
QuotaAmounts = Annotated[dict[str, int], Bound(MAX_QUOTA)]


class Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def drop_none(handler: SerializerFunctionWrapHandler, model: BaseModel, *names: str) -> Any:
    data: dict[str, Any] = handler(model)
    for name in names:
        if data.get(name) is None:
            data.pop(name, None)
    return data
