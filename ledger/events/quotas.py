"""The quota tree: quotas created, changed, deleted, and workspaces bound to them."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    PositiveInt,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from ledger.bounds import (
    MAX_FAIR_SHARING_WEIGHT,
    MAX_LABEL_VALUE,
    MAX_NAME,
    Bound,
)
from ledger.envelopes import EventData, event_type
from ledger.events.common import (
    LabelValue,
    Name,
    Part,
    QuotaAmounts,
)

__all__ = [
    "BorrowWithin",
    "PreemptionPolicy",
    "QueuePolicy",
    "QuotaChanged",
    "QuotaCreated",
    "QuotaDeleted",
    "QuotaSpec",
    "ReclaimPolicy",
    "UnfitHead",
    "WithinQuotaPolicy",
    "WorkspaceBound",
]


#: PAI's four (FIFO, RoundRobin, Balance, Intelligent) and Kueue's (StrictFIFO,
#: BestEffortFIFO) plus Priority; docs/dispatch.md "Queue policies" gives each one's order.
QueuePolicy = Literal[
    "FIFO", "RoundRobin", "Balance", "Intelligent", "StrictFIFO", "BestEffortFIFO", "Priority"
]
WithinQuotaPolicy = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
ReclaimPolicy = Literal["Never", "LowerPriority", "Any"]
#: what a job that can never fit does at the head of its queue (docs/dispatch.md)
UnfitHead = Literal["Retry", "Skip"]


class BorrowWithin(Part):
    policy: Literal["Never", "LowerPriority"] = "Never"
    max_priority_threshold: int | None = None


class PreemptionPolicy(Part):
    within_quota: WithinQuotaPolicy = "Never"
    reclaim: ReclaimPolicy = "Never"
    borrow_within: BorrowWithin = BorrowWithin()


class QuotaSpec(Part):
    """A quota node as applied: per resource key, guaranteed ``min`` and cap ``max``."""

    quota_id: str = Name
    parent: Annotated[str | None, Bound(MAX_NAME)] = None
    min: QuotaAmounts = {}
    max: QuotaAmounts = {}
    lend_limit: QuotaAmounts = {}
    preemption: PreemptionPolicy = PreemptionPolicy()
    queue_policy: QueuePolicy = "BestEffortFIFO"
    #: seconds: ``Balance`` widens its round-robin window once per timeout the head waits
    balance_timeout: PositiveInt | None = None
    #: seconds: ``Intelligent`` adds +1 effective priority per interval waited (up to 6)
    aging_interval: PositiveInt | None = None
    #: a job that can never fit is retried at its queue's head, holding a FIFO queue
    #: (``Retry``: PAI's and Kueue's), or set aside (``Skip``)
    on_unfit_head: UnfitHead = "Retry"
    #: Kueue's fair-sharing weight (0: the quota's share is infinite, it borrows last)
    fair_sharing_weight: Annotated[Decimal, Bound(MAX_FAIR_SHARING_WEIGHT)] = Field(
        default=Decimal(1), ge=0
    )
    #: on a root quota: its whole tree orders and preempts by dominant resource share
    fair_sharing: bool = False
    #: the subscribed resource groups its guarantee draws on (none: public capacity);
    #: a quota naming none inherits its parent's (docs/subscriptions.md)
    resource_groups: Annotated[tuple[LabelValue, ...], Bound(items=64)] = ()

    @model_serializer(mode="wrap")
    def _without_no_groups(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # left out when empty, so specs applied before groups existed hash as they did
        data: dict[str, Any] = handler(self)
        if not data.get("resource_groups"):
            data.pop("resource_groups", None)
        # likewise the default: specs applied before the choice existed hash as they did
        if data.get("on_unfit_head") == "Retry":
            data.pop("on_unfit_head", None)
        return data


@event_type("QuotaCreated")
class QuotaCreated(EventData):
    spec: QuotaSpec


@event_type("QuotaChanged")
class QuotaChanged(EventData):
    spec: QuotaSpec


@event_type("QuotaDeleted")
class QuotaDeleted(EventData):
    quota_id: str = Name


@event_type("WorkspaceBound")
class WorkspaceBound(EventData):
    workspace: LabelValue = Name
    quota: Annotated[str | None, Bound(MAX_LABEL_VALUE)] = None  # None unbinds
