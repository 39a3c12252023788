"""Money: ledger transactions (balanced postings of rated usage and charges), invoices,
voids, credit notes, payments, credit applied, over-settled invoices, overdue invoices."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    Field,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from ledger.bounds import (
    MAX_INT,
    MAX_RATED_QUANTITY,
    Bound,
)
from ledger.envelopes import EventData, event_type, upcaster
from ledger.events.common import (
    BillingMode,
    Name,
    NodePrice,
    Part,
    RateBound,
)
from ledger.money import plain_decimal, precise_from_decimal

__all__ = [
    "CreditNoteIssued",
    "InvoiceIssued",
    "InvoiceLine",
    "InvoiceOverSettled",
    "InvoiceVoided",
    "LedgerTransactionPosted",
    "Posting",
    "PreciseMinor",
    "RatedUsage",
    "SubscriptionCharge",
    "SubscriptionTermUnit",
]


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


class Posting(Part):
    """One leg of a transaction: signed minor units (debit positive), at sub-minor precision.

    Schema 2 of ``LedgerTransactionPosted``: ``amount_minor`` is a decimal of minor
    units (rating postings carry fractions of a cent; money is rounded once, on the
    invoice line). Schema 1 stored whole minor units (ints), valid as they are.
    """

    account: str = Name
    amount_minor: PreciseMinor
    currency: str = Field(pattern=r"^[A-Z]{3}$")


class RatedUsage(Part):
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


class SubscriptionCharge(Part):
    """What a subscription transaction bills (a term ordered) or refunds, so an invoice
    line needs nothing but the transaction: ``nodes`` x ``unit_price`` (per node per
    term, locked at order) for the term ``[starts_at, ends_at)``; a refund is negative."""

    subscription_id: str = Name
    term: int = Field(ge=1)
    kind: Literal["purchase", "renewal", "refund", "add-nodes", "sla-credit"]
    workspace: str = Name
    group: str = Name
    spec: str = Name
    nodes: int = Field(ge=1)
    unit: SubscriptionTermUnit
    unit_price: NodePrice
    starts_at: AwareDatetime
    ends_at: AwareDatetime
    detail: str = ""
    #: an SLA credit's undelivered node-hours (the line's quantity, negative); left out
    #: of the payload when None, so charges stored before it hash as they did
    node_hours: Decimal | None = None

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("node_hours") is None:
            data.pop("node_hours", None)
        return data


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
    # set when the transaction's own period was locked (closed) and it was booked into a
    # later open one (ledger.periods): the period its service dates fall in (additive,
    # left out when None like ``charge``)
    service_period: str | None = None

    @model_serializer(mode="wrap")
    def _without_empty_charge(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for optional in ("charge", "service_period"):
            if data.get(optional) is None:
                data.pop(optional, None)
        return data


@upcaster("LedgerTransactionPosted", 1)
def _transaction_v1(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 postings hold whole minor units (ints): valid schema 2 amounts as they are."""
    return data


class InvoiceLine(Part):
    """One line: a period's usage of one resource x billing mode x rate, rounded once.

    ``amount_minor`` is ``amount_precise`` (the sum of the line's postings, below the
    minor unit) rounded half-even. A service's or notebook's line names it by its uid in
    ``job_uid`` (its usage is invoiced apart from the workspace's jobs). Lines of invoices
    issued before lines were aggregated name a ``job_uid`` and carry no rate or precise
    amount.
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


@event_type("PeriodClosed")
class PeriodClosed(EventData):
    """A billing period (a UTC month, ``YYYY-MM``) closed for every workspace: from then
    on a posting dated into it is booked into the earliest open period as an adjustment
    (:mod:`ledger.periods`). Appended by ``billing close --period P`` or by the billing
    tick once the period's end + grace has passed; stream :data:`ledger.periods.PERIODS_STREAM`."""

    period: str = Field(pattern=r"^[0-9]{4}-(0[1-9]|1[0-2])$")
    reason: str = ""


@event_type("CreditNoteIssued")
class CreditNoteIssued(EventData):
    credit_note_id: str = Name
    invoice_id: str = Name
    amount_minor: int
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    reason: str


@event_type("PaymentRecorded")
class PaymentRecorded(EventData):
    """Money received against an invoice (stream ``invoice/<id>``), with how it was split:
    ``applied_minor`` settles the invoice, ``excess_minor`` (an overpayment) is kept as the
    workspace's credit balance (account ``credit/<workspace>``) for its next invoices.
    ``amount_minor = applied_minor + excess_minor``; the split is decided once, when the
    payment is recorded, so a replay folds the same figures."""

    payment_id: str = Name
    invoice_id: str = Name
    workspace: str = Name
    amount_minor: int = Field(gt=0, le=MAX_INT)
    applied_minor: int = Field(ge=0, le=MAX_INT)
    excess_minor: int = Field(ge=0, le=MAX_INT)
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    reference: str = Name
    received_at: AwareDatetime
    transaction_id: str = Name


@event_type("CreditApplied")
class CreditApplied(EventData):
    """Part of a workspace's credit balance (an overpayment of ``from_invoice_id``, payment
    ``payment_id``) applied to a later open invoice ``invoice_id`` (stream
    ``invoice/<invoice_id>``), with its balanced transaction (debit ``credit/<ws>``, credit
    ``receivable/<ws>``)."""

    application_id: str = Name
    invoice_id: str = Name
    from_invoice_id: str = Name
    payment_id: str = Name
    workspace: str = Name
    amount_minor: int = Field(gt=0, le=MAX_INT)
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    transaction_id: str = Name


@event_type("InvoiceOverSettled")
class InvoiceOverSettled(EventData):
    """An issued invoice whose period was settled beyond its total (paid, then credited or
    voided and re-issued smaller): the excess not returned yet, ``returned_minor``, moves
    from ``receivable/<ws>`` to the workspace's credit balance ``credit/<ws>`` (stream
    ``invoice/<invoice_id>``), so the next invoices are settled with it (``CreditApplied``
    naming ``settlement_id`` as its ``payment_id``). ``settled_minor``: what the period
    had credited, paid and applied when it was decided; ``settlement_id`` is derived from
    the invoice and that figure, so a re-run adds nothing and a later further excess
    returns only the difference."""

    settlement_id: str = Name
    invoice_id: str = Name
    workspace: str = Name
    period: str
    total_minor: int = Field(ge=0, le=MAX_INT)
    settled_minor: int = Field(gt=0, le=MAX_INT)
    returned_minor: int = Field(gt=0, le=MAX_INT)
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    transaction_id: str = Name


@event_type("InvoiceOverdue")
class InvoiceOverdue(EventData):
    """An issued invoice still open ``due_days`` after its issue (once per invoice)."""

    invoice_id: str = Name
    workspace: str = Name
    period: str
    due_at: AwareDatetime
    due_days: int = Field(ge=0, le=MAX_INT)
    open_minor: int = Field(gt=0, le=MAX_INT)
    currency: str = Field(pattern=r"^[A-Z]{3}$")
