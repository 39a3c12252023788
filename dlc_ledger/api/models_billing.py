"""Response models of ``/v1/invoices``, ``/v1/invoices/{invoice_id}`` and
``/v1/inventory``, so the OpenAPI document states every field a client reads.

The rows are the billing and inventory read models' (:mod:`projections.billing.invoice_pages`,
:func:`projections.billing.invoice_detail`,
:func:`projections.inventory.projection.capacity_at`)
with money as ``*_minor`` + currency + scale + ``*_display``
(:func:`dlc_ledger.presenters.money_fields`); these models describe and check them.
An inventory row holds only the keys it was grouped by: the others are optional and
left out (``response_model_exclude_unset``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AwareDatetime, Field, StrictBool

from dlc_ledger.api.models import DecimalText, Freshness, PreciseMinor, Strict, Timestamp
from dlc_ledger.api.models_subscriptions import NameText

__all__ = [
    "CreditApplication",
    "CreditNote",
    "CreditReturn",
    "InventoryPage",
    "InventoryRow",
    "InvoiceDetail",
    "InvoiceLine",
    "InvoiceLineJob",
    "InvoicePage",
    "InvoiceSummary",
    "Payment",
    "PaymentPage",
    "PaymentRequest",
    "PaymentResult",
    "RecordedPayment",
]

PaymentStatus = Literal["open", "paid", "overdue", "voided"]

Period = Annotated[str, Field(pattern=r"^\d{4}-(0[1-9]|1[0-2])$", examples=["2026-11"])]


class InvoiceSummary(Strict):
    """An invoice as listed; ``issued_at`` is cluster time, ``recorded_at`` store time."""

    invoice_id: str
    workspace: str
    period: Period
    status: Literal["issued", "voided"]
    payment_status: PaymentStatus = Field(
        description="open, paid (nothing open), overdue (InvoiceOverdue recorded, money "
        "open) or voided."
    )
    currency: str
    total_minor: int
    credited_minor: int
    paid_minor: int = Field(description="What its payments settled (excess not included).")
    applied_minor: int = Field(description="Credit from earlier overpayments applied to it.")
    returned_minor: int = Field(
        description="What it returned to the credit balance: settled beyond its total "
        "(InvoiceOverSettled)."
    )
    open_minor: int = Field(description="What its period still owes.")
    line_count: int
    issued_at: Timestamp
    overdue_at: Timestamp | None
    recorded_at: Timestamp
    scale: int
    total_display: str
    credited_display: str
    paid_display: str
    applied_display: str
    returned_display: str
    open_display: str


class InvoicePage(Strict):
    items: list[InvoiceSummary]
    next_cursor: str | None = None
    freshness: Freshness | None = None


class InvoiceLineJob(Strict):
    """A job's share of an invoice line, at full precision."""

    job_uid: str | None
    quantity: DecimalText
    amount_minor_precise: PreciseMinor


class InvoiceLine(Strict):
    """A resource x billing mode x rate, summed over jobs and rounded once."""

    line_no: int
    job_uid: str | None = Field(description="Set on a line of an invoice issued per job.")
    resource: str
    billing_mode: str
    quantity: DecimalText
    unit: str
    rate: DecimalText | None = Field(description="Per unit-hour; null on per-job invoices.")
    amount_minor: int
    amount_precise: PreciseMinor | None = Field(description="The precise sum, before rounding.")
    description: str
    transaction_ids: list[str]
    jobs: list[InvoiceLineJob]
    currency: str
    scale: int
    amount_display: str


class CreditNote(Strict):
    credit_note_id: str
    amount_minor: int
    currency: str
    reason: str
    recorded_at: Timestamp
    scale: int
    amount_display: str


class InvoicePayment(Strict):
    """A payment as an invoice lists it."""

    payment_id: str
    reference: str
    amount_minor: int
    applied_minor: int
    excess_minor: int = Field(description="Beyond what the invoice owed: kept as credit.")
    currency: str
    received_at: Timestamp
    recorded_at: Timestamp
    scale: int
    amount_display: str
    applied_display: str
    excess_display: str


class CreditApplication(Strict):
    """Credit from an overpayment of ``from_invoice_id`` applied to this invoice."""

    application_id: str
    from_invoice_id: str
    payment_id: str
    amount_minor: int
    currency: str
    occurred_at: Timestamp
    scale: int
    amount_display: str


class CreditReturn(Strict):
    """What this invoice's period was settled beyond its total, returned to the workspace's
    credit balance (InvoiceOverSettled)."""

    settlement_id: str
    amount_minor: int
    currency: str
    occurred_at: Timestamp
    scale: int
    amount_display: str


class InvoiceDetail(Strict):
    """One invoice with its lines, credit notes, payments and the credit applied to it."""

    invoice_id: str
    workspace: str
    period: Period
    currency: str
    total_minor: int
    line_count: int
    issued_at: Timestamp
    status: Literal["issued", "voided"]
    payment_status: PaymentStatus
    void_reason: str | None
    credited_minor: int
    paid_minor: int
    applied_minor: int
    returned_minor: int
    open_minor: int
    overdue_at: Timestamp | None
    recorded_at: Timestamp
    scale: int
    total_display: str
    credited_display: str
    paid_display: str
    applied_display: str
    returned_display: str
    open_display: str
    lines: list[InvoiceLine]
    credit_notes: list[CreditNote]
    payments: list[InvoicePayment]
    credit_applied: list[CreditApplication]
    returned_to_credit: list[CreditReturn]
    freshness: Freshness | None = None


class Payment(Strict):
    """A payment as listed: how it was split between the invoice and the credit balance."""

    payment_id: str
    invoice_id: str
    workspace: str
    period: str | None
    reference: str
    currency: str
    amount_minor: int
    applied_minor: int
    excess_minor: int
    received_at: Timestamp
    recorded_at: Timestamp
    source: str
    scale: int
    amount_display: str
    applied_display: str
    excess_display: str


class PaymentPage(Strict):
    items: list[Payment]
    next_cursor: str | None = None
    freshness: Freshness | None = None


class PaymentRequest(Strict):
    """``payments record``: ``amount`` in currency units as a decimal string."""

    invoice_id: NameText
    amount: str = Field(
        min_length=1, max_length=40, examples=["1200.50"], pattern=r"^[^\x00]*$",
        description="Currency units, positive, no more decimals than the currency's scale.",
    )  # fmt: skip
    at: AwareDatetime = Field(description="When the money was received (ISO 8601 with zone).")
    reference: NameText = Field(description="The bank's reference.")
    idempotency_key: NameText | None = Field(
        None, description="A retry with the same key adds nothing (default: the reference)."
    )
    dry_run: StrictBool = Field(
        default=False,
        description="Answer what would happen (the split, refusals included); append nothing.",
    )


class RecordedPayment(Strict):
    """The payment a write recorded (or would record: a dry run)."""

    payment_id: str
    invoice_id: str
    workspace: str
    reference: str
    currency: str
    amount_minor: int
    applied_minor: int = Field(description="What settled the invoice.")
    excess_minor: int = Field(description="Beyond what the invoice owed: kept as credit.")
    received_at: Timestamp
    scale: int
    amount_display: str
    applied_display: str
    excess_display: str


class PaymentResult(Strict):
    payment: RecordedPayment
    created: bool
    dry_run: bool
    freshness: Freshness | None = None


class InventoryRow(Strict):
    """Nodes and schedulable capacity of one group (the keys grouped by)."""

    pool: str | None = None
    resource_group: str | None = None
    flavor: str | None = None
    billing_mode: str | None = None
    node: str | None = None
    nodes: int = Field(description="Live nodes, cordoned included.")
    cordoned_nodes: int
    gpus: int = Field(description="Of nodes neither cordoned nor removed, as are the others.")
    mgpu: int
    cpu_milli: int
    memory_mib: int


class InventoryPage(Strict):
    items: list[InventoryRow]
    next_cursor: str | None = None
    freshness: Freshness | None = None
