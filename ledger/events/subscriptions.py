"""Subscriptions: node specs and prices, purchases, renewals, cancellations, expiries."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from ledger.bounds import (
    MAX_NAME,
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
    NodePrice,
    NonNegative,
    Part,
    drop_none,
)
from ledger.events.money import (
    SubscriptionTermUnit,
)

__all__ = [
    "NodeDowntime",
    "NodeSpec",
    "SlaCommitment",
    "SlaCreditIssued",
    "SubscriptionCancelled",
    "SubscriptionExpired",
    "SubscriptionNodesAdded",
    "SubscriptionNodesChangeScheduled",
    "SubscriptionPricesPublished",
    "SubscriptionPurchased",
    "SubscriptionRenewalFailed",
    "SubscriptionRenewed",
    "SubscriptionSpecChanged",
    "SubscriptionTerm",
]


#: The longest grace a delivery commitment may state: a week.
MAX_SLA_GRACE_MINUTES = 7 * 24 * 60


class SlaCommitment(Part):
    """A spec's delivery commitment (docs/subscriptions.md, "SLA credits"): subscribed
    nodes the cluster does not deliver for at least ``grace_minutes`` are credited."""

    grace_minutes: int = Field(ge=0, le=MAX_SLA_GRACE_MINUTES)


class NodeSpec(Part):
    """A node spec sold by subscription: its resources and its price per node per term,
    and its delivery commitment (``sla``, optional: left out of the payload when unset, so
    a book without one publishes the bytes it always did)."""

    flavor: Flavor = "gpu/any"
    gpus: int = Field(ge=0, le=MAX_NODE_GPUS)
    cpu_milli: CpuMilli = NonNegative
    memory_mib: Annotated[int, Bound(MAX_NODE_MEMORY_MIB)] = NonNegative
    monthly: NodePrice
    yearly: NodePrice
    sla: SlaCommitment | None = None

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        return drop_none(handler, self, "sla")


@event_type("SubscriptionPricesPublished")
class SubscriptionPricesPublished(EventData):
    """The subscription section of a price book: node specs and their term prices, in
    force from ``effective_from`` for terms ordered from then on (a price already locked
    into a term never changes)."""

    book_id: str = Name
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    scale: int = Field(ge=0, le=6)
    effective_from: AwareDatetime
    specs: dict[str, NodeSpec]


class SubscriptionTerm(Part):
    """One paid term: ``[starts_at, ends_at)`` at the prices locked when it was ordered."""

    term: int = Field(ge=1)
    unit: SubscriptionTermUnit
    starts_at: AwareDatetime
    ends_at: AwareDatetime
    unit_price: NodePrice  # per node for this term
    monthly_price: NodePrice  # the spec's monthly price then (refund rule)
    yearly_price: NodePrice
    amount_minor: int = NonNegative  # nodes x unit_price, in minor units
    book_id: str = Name
    ordered_at: AwareDatetime


@event_type("SubscriptionPurchased")
class SubscriptionPurchased(EventData):
    """Nodes of one spec bought into a resource group for a month or a year, paid by a
    workspace; billed in full at ``ordered_at`` into deferred revenue."""

    subscription_id: str = Name
    group: LabelValue = Name
    spec: str = Name
    nodes: int = Field(ge=1, le=100_000)
    workspace: LabelValue = Name
    auto_renew: bool = False
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    scale: int = Field(ge=0, le=6)
    node: NodeSpec
    first: SubscriptionTerm
    key: str | None = None


@event_type("SubscriptionRenewed")
class SubscriptionRenewed(EventData):
    """A next term ordered (by hand, or automatically from 3 days before expiry); it
    starts where the previous one ends, at the price in force when ordered."""

    subscription_id: str = Name
    next: SubscriptionTerm
    automatic: bool = False


@event_type("SubscriptionRenewalFailed")
class SubscriptionRenewalFailed(EventData):
    subscription_id: str = Name
    term: int = Field(ge=1)
    attempt: int = Field(ge=1)
    error: str


@event_type("SubscriptionCancelled")
class SubscriptionCancelled(EventData):
    """Unsubscribed: at the end of the term (no refund, no renewal) or immediately (the
    refund rule of docs/subscriptions.md; ``refund_minor`` is credited)."""

    subscription_id: str = Name
    mode: Literal["end-of-term", "immediately"]
    effective_at: AwareDatetime
    refund_minor: int = NonNegative
    no_reason: bool = False  # the once-a-year 5-day full refund was used
    rule: str = ""
    reason: str = ""


@event_type("SubscriptionExpired")
class SubscriptionExpired(EventData):
    """The last term ended: the capacity stops being schedulable at ``ended_at`` and is
    released (jobs on it stopped) after the grace, at ``released_at``."""

    subscription_id: str = Name
    ended_at: AwareDatetime
    released_at: AwareDatetime


#: At most this many nodes are named on an SLA credit (the rest are counted).
MAX_SLA_NODES_NAMED = 50


class NodeDowntime(Part):
    """A node of the group that was not delivered (cordoned or removed) while the term was
    short, and for how long of that time."""

    node: str = Name
    state: Literal["cordoned", "removed"]
    seconds: Decimal = Field(ge=0, decimal_places=6)


@event_type("SlaCreditIssued")
class SlaCreditIssued(EventData):
    """Subscribed node-time of one term the cluster did not deliver beyond the spec's grace,
    credited at the term's node-hour price: ``amount_minor`` = round half-even of
    ``undelivered_node_seconds`` x ``unit_price`` / ``term_seconds`` (in minor units), never
    above what the term kept after refunds. Posted by ``transaction_id`` (debit
    ``revenue/sla-credits/<spec>``, credit ``receivable/<workspace>``), a credit line on
    the invoice of ``period``."""

    subscription_id: str = Name
    term: int = Field(ge=1)
    workspace: LabelValue = Name
    group: LabelValue = Name
    spec: str = Name
    nodes: int = Field(ge=1, le=100_000)
    starts_at: AwareDatetime
    ends_at: AwareDatetime  # the end of the term's service (its end, or a cancellation)
    term_seconds: int = Field(ge=1)  # the whole term's length: the node-hour price's hours
    unit_price: NodePrice  # per node for the term, as locked
    grace_minutes: int = Field(ge=0, le=MAX_SLA_GRACE_MINUTES)
    subscribed_node_seconds: Decimal = Field(ge=0, decimal_places=6)
    undelivered_node_seconds: Decimal = Field(ge=0, decimal_places=6)
    amount_minor: int = NonNegative
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    transaction_id: Annotated[str | None, Bound(MAX_NAME)] = None  # None: nothing to credit
    period: str = Field(pattern=r"^[0-9]{4}-[0-9]{2}$")
    down_nodes: Annotated[tuple[NodeDowntime, ...], Bound(items=MAX_SLA_NODES_NAMED)] = ()
    more_down_nodes: int = NonNegative  # cordoned or removed nodes beyond those named


@event_type("SubscriptionNodesAdded")
class SubscriptionNodesAdded(EventData):
    """Nodes added to a running term, co-terminated with it: ``part`` is the addition
    priced as a term of its own, ``[effective_at, the term's end)`` at the term's locked
    prices, ``amount_minor`` = the term's daily price per node (unit price / ``term_days``)
    x ``days`` (every started day left counts) x ``nodes``, rounded half-even once. Billed
    in full at ``effective_at`` into deferred revenue and recognised day by day like the
    term; the group's capacity grows at ``effective_at``."""

    subscription_id: str = Name
    addition: int = Field(ge=1, le=100_000)  # 1, 2, ... within the subscription
    nodes: int = Field(ge=1, le=100_000)  # added
    nodes_after: int = Field(ge=1, le=200_000)  # the term's nodes from effective_at on
    days: int = Field(ge=1, le=366)  # started days left in the term
    term_days: int = Field(ge=1, le=366)  # days in the term
    part: SubscriptionTerm  # term = the running term's number; starts_at = effective_at
    key: str = Name


@event_type("SubscriptionNodesChangeScheduled")
class SubscriptionNodesChangeScheduled(EventData):
    """A node count for the terms ordered from ``from_term`` on (the next renewal, by hand
    or automatic, charges ``nodes``); the capacity changes at that term's start. A later
    change before that renewal replaces it."""

    subscription_id: str = Name
    nodes: int = Field(ge=1, le=100_000)
    from_term: int = Field(ge=2)
    requested_at: AwareDatetime
    key: str = Name


@event_type("SubscriptionSpecChanged")
class SubscriptionSpecChanged(EventData):
    """The subscription replaced at ``effective_at`` by ``new_subscription_id`` (of
    ``new_spec`` in ``new_group``, bought at the book in force then); the same store
    transaction cancels this one immediately with its refund."""

    subscription_id: str = Name
    new_subscription_id: str = Name
    new_spec: str = Name
    new_group: LabelValue = Name
    nodes: int = Field(ge=1, le=100_000)
    effective_at: AwareDatetime
    key: str = Name
