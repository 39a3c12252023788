"""The event catalogue of DESIGN §3: one typed payload model per event type.

Units are fixed here once: GPUs in milli-GPU, CPU in milli-cores, memory in MiB,
money as decimal strings (rates) or integer minor units (ledger amounts). Every
model is frozen and refuses unknown fields, so a producer's typo is an error at
the edge rather than a silently missing value in a bill.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PositiveInt,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from ledger.bounds import (
    MAX_CPU_MILLI,
    MAX_FAIR_SHARING_WEIGHT,
    MAX_FLAVOR,
    MAX_IDLE_MULTIPLIER,
    MAX_LABEL_VALUE,
    MAX_MEMORY_MIB,
    MAX_MGPU,
    MAX_NAME,
    MAX_NODE_GPUS,
    MAX_NODE_MEMORY_MIB,
    MAX_NODE_PRICE_MINOR,
    MAX_PRIORITY,
    MAX_QUOTA,
    MAX_RATE_MINOR,
    MAX_RATED_QUANTITY,
    MAX_REPLICA_SPECS,
    MAX_REPLICAS,
    MIN_PRIORITY,
    Bound,
)
from ledger.envelopes import Envelope, EventData, EventDecodeError, event_type, upcaster
from ledger.money import plain_decimal, precise_from_decimal

__all__ = [
    "CLUSTER_FACT_TYPES",
    "JOB_LIFECYCLE_TYPES",
    "MAX_RUN_SECONDS",
    "WATCHER_SOURCE_PREFIX",
    "AdmissionDecided",
    "BillingMode",
    "BudgetAction",
    "BudgetExceeded",
    "BudgetPeriod",
    "BudgetRemoved",
    "BudgetSet",
    "CreditNoteIssued",
    "InvoiceIssued",
    "InvoiceLine",
    "InvoiceVoided",
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
    "LedgerTransactionPosted",
    "NodeBillingMode",
    "NodeCordoned",
    "NodeRegistered",
    "NodeRemoved",
    "NodeSpec",
    "NotAClusterFact",
    "NotFromAWatcher",
    "NotificationDelivered",
    "NotificationFailed",
    "NotificationQueued",
    "NotificationRule",
    "NotificationRuleDisabled",
    "NotificationRuleRemoved",
    "NotificationRuleSet",
    "NotificationSecretGranted",
    "NotificationSecretRevoked",
    "NotificationTarget",
    "OccupancyEndReason",
    "OccupancyEnded",
    "OccupancyStarted",
    "Posting",
    "PreciseMinor",
    "PreemptionDecided",
    "PreemptionPolicy",
    "PriceBookPublished",
    "QuotaChanged",
    "QuotaCreated",
    "QuotaDeleted",
    "QuotaSpec",
    "RatedUsage",
    "ReplicaSpec",
    "SpotPriceChanged",
    "SubscriptionCancelled",
    "SubscriptionCharge",
    "SubscriptionExpired",
    "SubscriptionPricesPublished",
    "SubscriptionPurchased",
    "SubscriptionRenewalFailed",
    "SubscriptionRenewed",
    "SubscriptionTerm",
    "SubscriptionTermUnit",
    "Victim",
    "WorkspaceBound",
    "WrongStream",
    "check_cluster_fact",
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


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --- cluster ------------------------------------------------------------------


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


# --- jobs ---------------------------------------------------------------------


class ReplicaSpec(_Part):
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
        return _drop_none(handler, self, "max_run_seconds")


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


# --- occupancy ----------------------------------------------------------------


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


# --- what the cluster topic may carry ----------------------------------------

#: The facts a cluster watcher observes (job lifecycle, occupancy, nodes): the only event
#: types the cluster topic carries. Prices, quotas, money, invoices, decisions and budgets
#: enter the store only through the product's own commands. docs/wire-format.md.
CLUSTER_FACT_TYPES: frozenset[str] = JOB_LIFECYCLE_TYPES | {
    "OccupancyStarted",
    "OccupancyEnded",
    "NodeRegistered",
    "NodeCordoned",
    "NodeRemoved",
}
#: The ``source`` of every watcher's events: ``kube-watcher/<cluster>``.
WATCHER_SOURCE_PREFIX = "kube-watcher/"


class NotAClusterFact(EventDecodeError):
    reason = "not-a-cluster-fact"


class NotFromAWatcher(EventDecodeError):
    reason = "not-from-a-watcher"


class WrongStream(EventDecodeError):
    reason = "wrong-stream"


def check_cluster_fact(envelope: Envelope) -> None:
    """Refuse what a watcher cannot have sent: another type, source, or another stream.

    A job's facts live in ``job/<job_uid>``, a node's in ``node/<node>`` (as the watcher
    writes them), so a message cannot slip a fact into another job's or node's history.
    """
    if envelope.type not in CLUSTER_FACT_TYPES:
        raise NotAClusterFact(f"{envelope.type} is not a cluster fact: only commands write it")
    if not envelope.source.startswith(WATCHER_SOURCE_PREFIX):
        raise NotFromAWatcher(
            f"source {envelope.source!r} is not a watcher's ({WATCHER_SOURCE_PREFIX}<cluster>)"
        )
    if envelope.type.startswith("Node"):
        expected = f"node/{envelope.data.get('node')}"
    else:
        expected = f"job/{envelope.data.get('job_uid')}"
    if envelope.stream != expected:
        raise WrongStream(f"{envelope.type} of stream {envelope.stream!r}, expected {expected!r}")


# --- quotas -------------------------------------------------------------------

#: PAI's four (FIFO, RoundRobin, Balance, Intelligent) and Kueue's (StrictFIFO,
#: BestEffortFIFO) plus Priority; docs/dispatch.md "Queue policies" gives each one's order.
QueuePolicy = Literal[
    "FIFO", "RoundRobin", "Balance", "Intelligent", "StrictFIFO", "BestEffortFIFO", "Priority"
]
WithinQuotaPolicy = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
ReclaimPolicy = Literal["Never", "LowerPriority", "Any"]
#: what a job that can never fit does at the head of its queue (docs/dispatch.md)
UnfitHead = Literal["Retry", "Skip"]


class BorrowWithin(_Part):
    policy: Literal["Never", "LowerPriority"] = "Never"
    max_priority_threshold: int | None = None


class PreemptionPolicy(_Part):
    within_quota: WithinQuotaPolicy = "Never"
    reclaim: ReclaimPolicy = "Never"
    borrow_within: BorrowWithin = BorrowWithin()


class QuotaSpec(_Part):
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


# --- prices -------------------------------------------------------------------


class Rates(_Part):
    """Per unit-hour rates keyed by resource: ``gpu/<model>``, ``gpu/any``, ``cpu``, ``memory``."""

    public: Annotated[dict[str, Decimal], RateBound] = {}
    spot: Annotated[dict[str, Decimal], RateBound] = {}


@event_type("PriceBookPublished")
class PriceBookPublished(EventData):
    book_id: str = Name
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    scale: int = Field(ge=0, le=6)
    effective_from: AwareDatetime
    rates: Rates
    idle_multiplier: Annotated[Decimal, Bound(MAX_IDLE_MULTIPLIER)] = Field(ge=0)


@event_type("SpotPriceChanged")
class SpotPriceChanged(EventData):
    resource: str = Name
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    rate: Annotated[Decimal, RateBound] = Field(ge=0)
    effective_from: AwareDatetime


# --- money --------------------------------------------------------------------


def _sub_minor(value: Decimal) -> Decimal:
    precise_from_decimal(value)  # at most PRECISE_DIGITS decimals of a minor unit
    return value


#: An amount in minor units carried below the minor unit (``"0.333333333"`` of a cent);
#: JSON: a plain decimal string.
PreciseMinor = Annotated[
    Decimal,
    AfterValidator(_sub_minor),
    PlainSerializer(plain_decimal, return_type=str, when_used="json"),
]


class Posting(_Part):
    """One leg of a transaction: signed minor units (debit positive), at sub-minor precision.

    Schema 2 of ``LedgerTransactionPosted``: ``amount_minor`` is a decimal of minor
    units (rating postings carry fractions of a cent; money is rounded once, on the
    invoice line). Schema 1 stored whole minor units (ints), valid as they are.
    """

    account: str = Name
    amount_minor: PreciseMinor
    currency: str = Field(pattern=r"^[A-Z]{3}$")


class RatedUsage(_Part):
    """The usage a rating transaction charges for, so invoices and reports need no re-rating.

    ``usage`` is exact: resource units times microseconds (mGPU·µs, milli-core·µs,
    MiB·µs); ``quantity`` is the same in billing units (GPU-hour, core-hour,
    GiB-hour). Both are deltas: what this transaction adds to the line.
    """

    occupancy_id: str = Name
    job_uid: str = Name
    workspace: str = Name
    quota: str | None = None
    user: str = "unknown"
    flavor: str = "gpu/any"
    resource: str = Name
    billing_mode: BillingMode
    usage_period: str  # "YYYY-MM" the usage happened in; the posting period may be later
    unit: str
    # resource units x microseconds: beyond the JSON-safe range, within bigint
    usage: Annotated[int, Bound(2**63 - 1, -(2**63))]
    quantity: Annotated[Decimal, Bound(MAX_RATED_QUANTITY, -MAX_RATED_QUANTITY)]
    as_of: AwareDatetime
    # the rate (per unit-hour) of this usage: a transaction posts one rate's part of a
    # line; None on transactions posted before rates were split out
    rate: Annotated[Decimal | None, RateBound] = None


SubscriptionTermUnit = Literal["month", "year"]


class SubscriptionCharge(_Part):
    """What a subscription transaction bills (a term ordered) or refunds, so an invoice
    line needs nothing but the transaction: ``nodes`` x ``unit_price`` (per node per
    term, locked at order) for the term ``[starts_at, ends_at)``; a refund is negative."""

    subscription_id: str = Name
    term: int = Field(ge=1)
    kind: Literal["purchase", "renewal", "refund"]
    workspace: str = Name
    group: str = Name
    spec: str = Name
    nodes: int = Field(ge=1)
    unit: SubscriptionTermUnit
    unit_price: NodePrice
    starts_at: AwareDatetime
    ends_at: AwareDatetime
    detail: str = ""


@event_type("LedgerTransactionPosted", version=2)
class LedgerTransactionPosted(EventData):
    transaction_id: str = Name
    postings: tuple[Posting, ...]
    cause_event_ids: tuple[str, ...] = ()
    period: str | None = None  # "YYYY-MM"
    memo: str = ""
    reverses: str | None = None
    usage: RatedUsage | None = None  # set on rating transactions (additive, optional)
    # set on subscription charges and refunds (additive; left out of the payload when
    # None, so transactions stored before it hash as they did)
    charge: SubscriptionCharge | None = None

    @model_serializer(mode="wrap")
    def _without_empty_charge(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("charge") is None:
            data.pop("charge", None)
        return data


@upcaster("LedgerTransactionPosted", 1)
def _transaction_v1(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 postings hold whole minor units (ints): valid schema 2 amounts as they are."""
    return data


class InvoiceLine(_Part):
    """One line: a period's usage of one resource x billing mode x rate, rounded once.

    ``amount_minor`` is ``amount_precise`` (the sum of the line's postings, below the
    minor unit) rounded half-even. Lines of invoices issued before lines were
    aggregated name a ``job_uid`` and carry no rate or precise amount.
    """

    description: str
    workspace: str
    resource: str
    billing_mode: BillingMode
    job_uid: str | None = None
    quantity: Decimal
    unit: str
    amount_minor: int
    transaction_ids: tuple[str, ...] = ()
    rate: Decimal | None = None
    amount_precise: PreciseMinor | None = None


@event_type("InvoiceIssued")
class InvoiceIssued(EventData):
    invoice_id: str = Name
    workspace: str = Name
    period: str
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    lines: tuple[InvoiceLine, ...]
    total_minor: int
    issued_at: AwareDatetime
    # the transaction posting the lines' rounding (total_minor minus the precise sum)
    rounding_transaction_id: str | None = None


@event_type("InvoiceVoided")
class InvoiceVoided(EventData):
    invoice_id: str = Name
    reason: str


@event_type("CreditNoteIssued")
class CreditNoteIssued(EventData):
    credit_note_id: str = Name
    invoice_id: str = Name
    amount_minor: int
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    reason: str


# --- decisions ----------------------------------------------------------------


class Victim(_Part):
    job_uid: str
    quota: str
    reason: str
    #: the victim's pending episode it was chosen in (its preemptions so far)
    attempt: int = Field(default=0, ge=0)


@event_type("AdmissionDecided")
class AdmissionDecided(EventData):
    """The dispatcher's decision about a pending job: ``admit`` (it is resumed next), or
    ``pending`` with a tiered ``reason`` (stored when the reason changes, not per cycle);
    or about a running one: ``stop`` with reason ``MaxRunTimeExceeded`` (it ran past its
    declared maximum: it is stopped for good, ``state["run"]`` says ``ran`` and ``max``).
    ``attempt`` is the job's pending episode (its preemptions so far), ``state`` the quota
    figures it was decided on (``docs/dispatch.md``, "The live loop")."""

    job_uid: str = Name
    quota: str
    outcome: Literal["admit", "preempt", "pending", "stop"]
    borrowing: bool = False
    state: dict[str, dict[str, int]] = {}
    reason: str | None = None
    estimated_start: AwareDatetime | None = None
    attempt: int = Field(default=0, ge=0)
    #: 1-based places in its quota's queue and its whole tree (pending decisions)
    position: int | None = None
    cohort_position: int | None = None
    #: the estimated start as a range (docs/dispatch.md, "Why?"): the low and high
    #: percentile starts; left out when unset, so decisions stored before them hash as
    #: they did (``high`` unset with a ``low``: no upper bound)
    estimated_start_low: AwareDatetime | None = None
    estimated_start_high: AwareDatetime | None = None

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _drop_none(handler, self, "estimated_start_low", "estimated_start_high")


@event_type("PreemptionDecided")
class PreemptionDecided(EventData):
    preemptor: str = Name
    victims: tuple[Victim, ...]
    reason: str
    state: dict[str, dict[str, int]] = {}
    #: the preemptor's quota and pending episode (its preemptions so far)
    quota: str | None = None
    attempt: int = Field(default=0, ge=0)


# --- budgets ------------------------------------------------------------------

BudgetAction = Literal["notify", "stop"]
BudgetPeriod = Literal["month"]


@event_type("BudgetSet")
class BudgetSet(EventData):
    """A workspace's spending limit per period (``dlc-ledger budgets apply``), in integer
    minor units at ``scale`` (the billing scale of ``currency`` when it was applied)."""

    workspace: LabelValue = Name
    amount_minor: int = NonNegative
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    scale: int = Field(ge=0, le=6)
    period: BudgetPeriod = "month"
    action: BudgetAction = "notify"


@event_type("BudgetRemoved")
class BudgetRemoved(EventData):
    workspace: LabelValue = Name


@event_type("BudgetExceeded")
class BudgetExceeded(EventData):
    """The workspace's posted cost in ``period`` crossed its budget (at ``occurred_at``).

    ``budget_event_id`` names the ``BudgetSet`` it crossed: a raised budget is a new one,
    crossed (or not) on its own. The optional fields are additive (docs/billing.md)."""

    workspace: str = Name
    budget_minor: int
    spent_minor: int
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    period: str | None = None
    action: BudgetAction | None = None
    budget_event_id: str | None = None


def _drop_none(handler: SerializerFunctionWrapHandler, model: BaseModel, *names: str) -> Any:
    data: dict[str, Any] = handler(model)
    for name in names:
        if data.get(name) is None:
            data.pop(name, None)
    return data


@event_type("NotificationQueued")
class NotificationQueued(EventData):
    """A notification to deliver (the outbox). The optional fields are set by the event
    centre's rules (docs/notifications.md) and left out of the payload when unset, so a
    budget's queued notification stored before them hashes as it did."""

    notification_id: str = Name
    target: str
    subject: str
    body: dict[str, str] = {}
    rule: str | None = None  # "<workspace>/<name>"
    event_type: str | None = None  # the rule's event name (JobFailed, JobWaitingTooLong, ...)
    order_key: str | None = None  # delivered in order per key (a job's uid)
    cause_event_id: str | None = None
    occurred_at: AwareDatetime | None = None  # when the fact happened (cluster time)
    payload: dict[str, Any] | None = None  # the webhook body's "data"

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _drop_none(
            handler,
            self,
            "rule",
            "event_type",
            "order_key",
            "cause_event_id",
            "occurred_at",
            "payload",
        )


@event_type("NotificationDelivered")
class NotificationDelivered(EventData):
    notification_id: str = Name
    attempts: int = Field(ge=1)
    latency_ms: int | None = None  # from the fact's append to the receiver's answer

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _drop_none(handler, self, "latency_ms")


@event_type("NotificationFailed")
class NotificationFailed(EventData):
    notification_id: str = Name
    attempts: int = Field(ge=1)
    error: str


class NotificationTarget(_Part):
    """Where a rule's notifications go: a webhook signed per Standard Webhooks with the
    secret in an environment variable, or an apprise URL held in one. Never a secret."""

    webhook: Annotated[str | None, Bound(2048)] = None
    secret_env: Annotated[str | None, Bound(128)] = None
    apprise_env: Annotated[str | None, Bound(128)] = None


class NotificationRule(_Part):
    name: str = Name
    workspace: LabelValue = Name  # "*": every workspace (an admin's rule)
    events: Annotated[tuple[str, ...], Bound(items=32)]
    user: LabelValue | None = None  # scope "mine": only this user's jobs
    quota: LabelValue | None = None
    billing_mode: BillingMode | None = None
    job_name: Annotated[str | None, Bound(253)] = None  # a glob: train-*
    waiting_longer_than: PositiveInt | None = None  # seconds (JobWaitingTooLong)
    running_longer_than: PositiveInt | None = None  # seconds (JobRunningTooLong)
    expiring_within_days: PositiveInt | None = None  # SubscriptionExpiring
    target: NotificationTarget
    enabled: bool = True


@event_type("NotificationRuleSet")
class NotificationRuleSet(EventData):
    """A rule of a workspace's event centre, created or replaced (``notifications apply``),
    in force from the event's ``occurred_at`` (``--effective-at``)."""

    rule: NotificationRule


@event_type("NotificationRuleRemoved")
class NotificationRuleRemoved(EventData):
    workspace: LabelValue = Name
    name: str = Name


@event_type("NotificationRuleDisabled")
class NotificationRuleDisabled(EventData):
    """The sender turned a rule off: its webhook answered ``410 Gone`` (Standard Webhooks:
    the endpoint is gone). Applying the rule again turns it back on."""

    workspace: LabelValue = Name
    name: str = Name
    reason: Annotated[str, Bound(500)]


@event_type("NotificationSecretGranted")
class NotificationSecretGranted(EventData):
    """An admin let a workspace's rules name one environment variable of the sender (a
    webhook secret or an apprise URL); a rule may name no other (docs/notifications.md)."""

    workspace: LabelValue = Name
    variable: Annotated[str, Bound(128)]


@event_type("NotificationSecretRevoked")
class NotificationSecretRevoked(EventData):
    workspace: LabelValue = Name
    variable: Annotated[str, Bound(128)]


# --- subscriptions (docs/subscriptions.md) -------------------------------------------


class NodeSpec(_Part):
    """A node spec sold by subscription: its resources and its price per node per term."""

    flavor: Flavor = "gpu/any"
    gpus: int = Field(ge=0, le=MAX_NODE_GPUS)
    cpu_milli: CpuMilli = NonNegative
    memory_mib: Annotated[int, Bound(MAX_NODE_MEMORY_MIB)] = NonNegative
    monthly: NodePrice
    yearly: NodePrice


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


class SubscriptionTerm(_Part):
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
