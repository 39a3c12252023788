"""Request and response models of ``/v1/subscriptions`` and ``/v1/resource-groups``, so
the OpenAPI document states every field a client sends and reads.

The rows are the use cases' (:func:`dlc_ledger.services.subscriptions.subscription_row`,
:func:`~dlc_ledger.services.subscriptions.term_rows`,
:func:`dlc_ledger.services.subscriptions.resource_groups`) with money as ``*_minor`` +
currency + scale + ``*_display`` (:func:`dlc_ledger.presenters.money_fields`), as the
invoices show it. A request body is strict too: a misspelt field is a 422, not a default;
a number or a flag must be a JSON number or boolean (``"1"`` is a 422, not a 1); a name
is checked for control characters and length where it enters
(:func:`ledger.bounds.check_name`, the CLI's check too), free text likewise
(:func:`ledger.bounds.check_free_text`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StrictBool, StrictInt, ValidationInfo

from dlc_ledger.api.listing import Instant
from dlc_ledger.api.models import DecimalText, Freshness, Strict, Timestamp
from ledger.bounds import MAX_LABEL_VALUE, MAX_NAME, MAX_TEXT, check_free_text, check_name
from ledger.subscriptions import Status

__all__ = [
    "AddNodesRequest",
    "AddNodesResult",
    "CancelRequest",
    "CancelResult",
    "Cancellation",
    "ChangeRow",
    "NodesChangeRequest",
    "NodesChangeResult",
    "OrderResult",
    "PurchaseRequest",
    "RefundTerm",
    "RenewRequest",
    "ResourceGroupDetail",
    "ResourceGroupPage",
    "ResourceGroupRow",
    "SpecChangeRequest",
    "SpecChangeResult",
    "SubscriptionDetail",
    "SubscriptionPage",
    "SubscriptionSummary",
    "SubscriptionTermRow",
    "SubscriptionTermSla",
]

TermUnit = Literal["month", "year"]
#: storable text: PostgreSQL text holds no NUL character
_NO_NUL = r"^[^\x00]*$"


def _label(value: str, info: ValidationInfo) -> str:
    check_name(value, info.field_name or "name", MAX_LABEL_VALUE)
    return value


def _name(value: str, info: ValidationInfo) -> str:
    check_name(value, info.field_name or "name", MAX_NAME)
    return value


def _text(value: str, info: ValidationInfo) -> str:
    check_free_text(value, info.field_name or "text")
    return value


LabelText = Annotated[
    str,
    Field(min_length=1, max_length=MAX_LABEL_VALUE, pattern=_NO_NUL),
    AfterValidator(_label),
]
NameText = Annotated[
    str, Field(min_length=1, max_length=MAX_NAME, pattern=_NO_NUL), AfterValidator(_name)
]
FreeText = Annotated[str, Field(max_length=MAX_TEXT, pattern=_NO_NUL), AfterValidator(_text)]
WriteInstant = Annotated[
    Instant | None,
    Field(description="The order instant (ISO 8601 with zone); default the cluster's now."),
]
DryRun = Annotated[
    StrictBool,
    Field(
        description="Answer what would happen, refusals included (the same checks, the same "
        "status); append nothing."
    ),
]


class PurchaseRequest(Strict):
    """Buy ``nodes`` nodes of ``spec`` into ``group`` for a month or a year, paid by
    ``workspace`` and billed in full at the order instant (into deferred revenue)."""

    group: LabelText = Field(description="The resource group the nodes join.")
    spec: NameText = Field(description="A node spec of the price book in force.")
    nodes: StrictInt = Field(ge=1, le=100_000)
    term: TermUnit
    workspace: LabelText = Field(
        description="The workspace that pays: one the ledger knows (a quota binds it or a "
        "job ran in it), unless ``allow_unknown_workspace``."
    )
    allow_unknown_workspace: StrictBool = Field(
        default=False,
        description="Accept a workspace no quota binds and no job ran in yet (else a 400).",
    )
    auto_renew: StrictBool = Field(default=False, description="Renew 3 days before each term ends.")
    at: WriteInstant = None
    key: NameText | None = Field(
        default=None,
        description=(
            "Idempotency key: a repeat returns the same subscription (200); without one an "
            "identical purchase is a 409."
        ),
    )
    dry_run: DryRun = False


class RenewRequest(Strict):
    """Order the next term now, at the price in force; it starts when the last one ends."""

    at: WriteInstant = None
    dry_run: DryRun = False


class CancelRequest(Strict):
    """End the subscription at the end of the running term (no refund; a renewal ordered
    ahead is refunded in full), or ``immediately`` with the refund rule."""

    immediately: StrictBool = False
    at: WriteInstant = None
    reason: FreeText = Field(default="", description="Why (kept on the event).")
    dry_run: DryRun = False


class AddNodesRequest(Strict):
    """Add ``nodes`` nodes to the running term from ``at`` to its end, charged by started
    day at the term's locked price (docs/subscriptions.md "Changing a subscription")."""

    nodes: StrictInt = Field(ge=1, le=100_000)
    key: NameText = Field(
        description="Idempotency key: a retry answers 200 and adds nothing; another request "
        "under it is a 409."
    )
    at: WriteInstant = None
    dry_run: DryRun = False


class NodesChangeRequest(Strict):
    """Order the next term (the first not yet ordered) with ``nodes`` nodes: fewer, or
    more. Only at the renewal: removing nodes mid-term is refused."""

    nodes: StrictInt = Field(ge=1, le=100_000)
    at_renewal: Literal[True] = Field(
        default=True, description="Always true: a count changes at the next renewal."
    )
    key: NameText | None = None
    at: WriteInstant = None
    dry_run: DryRun = False


class SpecChangeRequest(Strict):
    """Replace the subscription by one of ``spec``: bought at ``at`` at the price in force
    (same payer, term unit and auto-renewal), the old one cancelled immediately with its
    refund, in one transaction."""

    spec: NameText
    key: NameText = Field(description="Idempotency key (as for add-nodes).")
    group: LabelText | None = Field(
        default=None, description="The new nodes' group; default the one holding ``spec``."
    )
    nodes: StrictInt | None = Field(default=None, ge=1, le=100_000)
    at: WriteInstant = None
    dry_run: DryRun = False


class SubscriptionSummary(Strict):
    """A subscription as of an instant: ``term`` and ``unit_price`` are the running
    term's (else the last's), ``terms`` how many were ordered, ``paid`` their sum."""

    subscription_id: str
    group: str
    spec: str
    nodes: int
    workspace: str
    term: TermUnit
    status: Status
    auto_renew: bool = Field(description="Whether a next term will still be ordered.")
    starts_at: Timestamp
    ends_at: Timestamp = Field(description="When its capacity stops being schedulable.")
    terms: int
    unit_price: DecimalText = Field(description="Per node for the term, in the currency.")
    paid_minor: int
    refunded_minor: int
    currency: str
    scale: int
    paid_display: str
    refunded_display: str


class SubscriptionTermRow(Strict):
    """One ordered term, at the price locked when it was ordered."""

    term: int
    unit: TermUnit
    nodes: int = Field(description="The nodes the term was ordered with (added ones apart).")
    starts_at: Timestamp
    ends_at: Timestamp
    ordered_at: Timestamp
    book_id: str
    unit_price: DecimalText
    amount_minor: int
    currency: str
    scale: int
    amount_display: str


class SubscriptionTermSla(SubscriptionTermRow):
    """A term as ``subscriptions show`` lists it: with its SLA credit as of ``at``, the
    rows of ``report subscriptions --group-by term`` (docs/subscriptions.md, "SLA
    credits")."""

    sla: Literal["credited", "pending", "none"] = Field(
        description="credited: booked by ``at``; pending: what it comes to so far (booked "
        "a grace after the term's service ends); none: its book states no commitment."
    )
    undelivered_node_hours: DecimalText = Field(
        description="Node-hours short beyond the grace, up to ``at`` (or the term's end)."
    )
    sla_credit_minor: int | None = Field(description="The credit (null: no commitment).")
    sla_credit_display: str | None = None


class Cancellation(Strict):
    """How a subscription was cancelled and what was refunded (docs/subscriptions.md)."""

    mode: Literal["immediately", "end-of-term"]
    effective_at: Timestamp = Field(description="When its capacity ends.")
    reason: str
    no_reason: bool = Field(description="The 5-day full refund was used.")
    rule: str = Field(description="The refund rule applied, per term.")
    refund_minor: int
    currency: str
    scale: int
    refund_display: str


class RefundTerm(Strict):
    """One term's part of a cancellation's refund (``addition``: the k-th nodes added to
    the term, refunded as a part of their own; 0: the term itself)."""

    term: int
    addition: int = 0
    paid_minor: int
    consumed_minor: int
    refund_minor: int
    why: str
    currency: str
    scale: int
    paid_display: str
    consumed_display: str
    refund_display: str


class ChangeRow(Strict):
    """One change of a subscription, as ``subscriptions show`` lists it: ``add-nodes``
    (``amount`` charged), ``nodes-at-renewal`` (pending, applied or replaced) or
    ``change-spec`` (``amount``: minus the old one's refund)."""

    change: Literal["add-nodes", "nodes-at-renewal", "change-spec"]
    at: Timestamp
    nodes: int
    detail: str
    amount_minor: int
    key: str
    currency: str
    scale: int
    amount_display: str


class SubscriptionPage(Strict):
    """Every subscription, by start then id, as of ``at``."""

    items: list[SubscriptionSummary]
    next_cursor: str | None = None
    freshness: Freshness | None = None
    at: Timestamp


class SubscriptionDetail(Strict):
    """One subscription as of ``at``, its terms, and its cancellation (null: none)."""

    subscription: SubscriptionSummary
    terms: list[SubscriptionTermSla]
    cancellation: Cancellation | None
    changes: list[ChangeRow] = Field(
        default_factory=list, description="Nodes added, counts scheduled, a spec change."
    )
    at: Timestamp
    freshness: Freshness | None = None


class OrderResult(Strict):
    """A purchase or renewal: the subscription after it (as of the order instant) and the
    term it ordered. ``created``: appended now (false: an idempotent repeat, or a dry run)."""

    subscription: SubscriptionSummary
    term: SubscriptionTermRow
    created: bool
    dry_run: bool
    freshness: Freshness | None = None


class CancelResult(Strict):
    """A cancellation: the subscription after it, the cancellation, the refund per term."""

    subscription: SubscriptionSummary
    cancellation: Cancellation
    refund_terms: list[RefundTerm]
    dry_run: bool
    freshness: Freshness | None = None


class AddNodesResult(Strict):
    """Nodes added: the subscription after it, and the change (its charge in ``amount``).
    ``created``: appended now (false: a retry of the key, or a dry run)."""

    subscription: SubscriptionSummary
    change: ChangeRow
    created: bool
    dry_run: bool
    freshness: Freshness | None = None


class NodesChangeResult(AddNodesResult):
    """A node count scheduled for the next renewal."""


class SpecChangeResult(Strict):
    """A change of spec: the old subscription (cancelled, its refund per part), the new
    one and its first term."""

    old: SubscriptionSummary
    new: SubscriptionSummary
    term: SubscriptionTermRow
    cancellation: Cancellation | None
    refund_terms: list[RefundTerm]
    created: bool
    dry_run: bool
    freshness: Freshness | None = None


class ResourceGroupRow(Strict):
    """A resource group at an instant: subscribed nodes (schedulable subscriptions),
    delivered nodes (the group's live nodes the watcher saw), the capacity the
    subscriptions give per flavor/cpu/memory (mGPU, milli-cores, MiB), the quotas that
    draw on it and the subscriptions bought into it."""

    group: str
    spec: str | None = Field(description="Null: a group only seen on nodes, never bought.")
    subscribed_nodes: int
    delivered_nodes: int
    capacity: dict[str, int]
    quotas: list[str]
    subscriptions: list[str]


class ResourceGroupPage(Strict):
    items: list[ResourceGroupRow]
    next_cursor: str | None = None
    freshness: Freshness | None = None
    at: Timestamp


class ResourceGroupDetail(ResourceGroupRow):
    at: Timestamp
    freshness: Freshness | None = None


class UtilisationRows(Strict):
    """``report subscriptions``: by group or month, subscribed / used / lent / idle /
    over GPU-hours (decimal strings), what the borrowers paid, utilisation, the cost and
    the cost per used GPU-hour; by quota or workspace, each group's cost shown back by
    guarantee and by use; by term, node-hours subscribed, delivered and not delivered
    beyond the SLA grace, and the SLA credit. Amounts as ``*_minor`` + currency + scale +
    ``*_display`` (docs/subscriptions.md, "Are we using what we pay for?", "SLA credits")."""

    items: list[dict[str, Any]]
    next_cursor: str | None = None
    freshness: Freshness | None = None
    start: Timestamp
    end: Timestamp
