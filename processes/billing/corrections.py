"""Invoices after issue: void one, credit part of one (the billing context's corrections).

Invoices are events (``InvoiceIssued`` on ``invoice/<id>``), never edited: a wrong one
is voided (``InvoiceVoided``, with the reversal of its rounding posting; the period
reopens and the next billing tick issues the next revision) or partly refunded with a
credit note (``CreditNoteIssued`` plus a balanced ``LedgerTransactionPosted`` that
credits the workspace's receivable and debits ``revenue/credit-notes``). ``source`` of
each event is the principal that asked (a CLI user, an API token).

Reads read the projection as it is; the two writes bring it to the head before they
decide (an invoice voided a moment ago is voided). After their append, the use cases
(:mod:`dlc_ledger.services.billing.invoices`) bring every read model to the head, billing
included, so the caller reads its own write.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import text

from ledger.accounts import (
    balanced_transaction,
    receivable_account,
    reversal,
    rounding_transaction_id,
    transaction_envelope,
)
from ledger.envelopes import Envelope, make_envelope
from ledger.errors import Conflict, Invalid
from ledger.events import CreditNoteIssued, InvoiceVoided, LedgerTransactionPosted, Posting
from ledger.ids import deterministic_id
from ledger.money import default_scale, format_minor, from_minor, parse_decimal, to_minor
from ledger.store.base import EventStore
from projections.billing import CREDIT_NOTES_ACCOUNT, catch_up_billing, find_invoice, load_schedule

__all__ = ["CreditResult", "VoidResult", "issue_credit_note", "void_invoice"]


@dataclass(frozen=True)
class VoidResult:
    invoice_id: str
    event_id: str  # the InvoiceVoided event
    rounding_reversed: bool  # the invoice had a rounding posting, now reversed


@dataclass(frozen=True)
class CreditResult:
    note: CreditNoteIssued
    created: bool  # False: the idempotency key's note already existed (nothing appended)


def void_invoice(store: EventStore, invoice_id: str, reason: str, *, principal: str) -> VoidResult:
    """Void an issued invoice: its period reopens, and its rounding posting is reversed
    (the re-issue rounds anew)."""
    catch_up_billing(store)
    inv = find_invoice(store, invoice_id)
    if inv.status != "issued":
        raise Conflict(f"invoice {invoice_id} is already {inv.status}")
    if not reason.strip():
        raise Invalid("a void needs a --reason")
    now = datetime.now(UTC)
    voided = deterministic_id("event", "InvoiceVoided", invoice_id)
    reversed_rounding = _rounding_reversal(store, invoice_id, str(voided), now)
    store.append(
        [
            make_envelope(
                InvoiceVoided(invoice_id=invoice_id, reason=reason),
                event_id=voided,
                stream=f"invoice/{invoice_id}",
                occurred_at=now,
                observed_at=now,
                source=principal,
            ),
            *reversed_rounding,
        ],
    )
    return VoidResult(invoice_id, str(voided), rounding_reversed=bool(reversed_rounding))


def _rounding_reversal(
    store: EventStore, invoice_id: str, voided: str, now: datetime
) -> list[Envelope]:
    """The reversal of a voided invoice's rounding posting, if it had one."""
    with store.snapshot() as uow:
        data = uow.connection.execute(
            text("SELECT data FROM billing_transactions WHERE transaction_id = :t"),
            {"t": rounding_transaction_id(invoice_id)},
        ).scalar()
    if data is None:
        return []
    txn = reversal(
        LedgerTransactionPosted.model_validate(data),
        memo=f"rounding of voided invoice {invoice_id} reversed",
        cause_event_ids=(voided,),
    )
    return [transaction_envelope(txn, now)]


def _credit_minor(amount: str, scale: int, currency: str) -> int:
    """``amount`` in minor units; refused when the currency's scale cannot hold it exactly."""
    try:
        value = parse_decimal(amount, what="amount")
    except ValueError as exc:
        raise Invalid(str(exc)) from None
    minor = to_minor(value, scale)
    if from_minor(minor, scale) != value:
        raise Invalid(
            f"amount {amount} has more decimals than {currency} allows (scale {scale}): "
            f"it would be stored as {format_minor(minor, scale, currency)}"
        )
    if minor <= 0:
        raise Invalid("a credit note amount must be positive")
    return minor


def issue_credit_note(
    store: EventStore,
    invoice_id: str,
    amount: str,
    reason: str,
    *,
    principal: str,
    idempotency_key: str | None = None,
) -> CreditResult:
    """Credit ``amount`` (currency units, e.g. ``"12.50"``) against an issued invoice.

    The note's id derives from ``idempotency_key`` (default: the invoice, amount and
    reason), so a repeat is a no-op that returns the existing note, and a key reused
    for a different credit is refused.
    """
    catch_up_billing(store)
    inv = find_invoice(store, invoice_id)
    with store.snapshot() as uow:
        schedule = load_schedule(uow.connection)
    scale = schedule.scale if schedule.scale is not None else default_scale(inv.currency)
    minor = _credit_minor(amount, scale, inv.currency)
    key = idempotency_key
    if key is None:
        key = f"{invoice_id}/{minor}/{reason}"
    elif not key.strip():
        raise Invalid("--idempotency-key must not be empty")
    note_id = str(deterministic_id("credit-note", key))
    note = CreditNoteIssued(
        credit_note_id=note_id,
        invoice_id=invoice_id,
        amount_minor=minor,
        currency=inv.currency,
        reason=reason,
    )
    before = _existing_note(store, note_id)
    if before is not None:
        if before != note:
            raise Conflict(
                f"idempotency key {key!r} was used for credit note {note_id} "
                f"({format_minor(before.amount_minor, scale, before.currency)} on invoice "
                f"{before.invoice_id}: {before.reason}); use a new key for a different credit"
            )
        return CreditResult(before, created=False)
    if inv.status != "issued":
        raise Conflict(f"invoice {invoice_id} is {inv.status}: credit notes need an issued one")
    # the period's credits, voided revisions' included: a void carries the credit notes
    # issued on it to the re-issue, so a period is never credited beyond its total
    credited = _period_credited(store, inv.workspace, inv.period)
    open_minor = max(0, inv.total_minor - credited)
    if minor > open_minor:
        carried = credited - inv.credited_minor
        also = (
            f", {format_minor(carried, scale, inv.currency)} of it on voided revisions of "
            f"{inv.period}"
            if carried
            else ""
        )
        raise Conflict(
            f"credit of {format_minor(minor, scale, inv.currency)} exceeds what is left on the "
            f"invoice ({format_minor(open_minor, scale, inv.currency)}); "
            f"{format_minor(credited, scale, inv.currency)} credited already{also}"
        )
    stream = f"invoice/{invoice_id}"
    version = store.stream_version(stream)
    event_id = deterministic_id("event", "CreditNoteIssued", note_id)
    txn = balanced_transaction(
        str(deterministic_id("txn-credit-note", note_id)),
        [
            Posting(
                account=receivable_account(inv.workspace),
                amount_minor=-minor,
                currency=inv.currency,
            ),
            Posting(account=CREDIT_NOTES_ACCOUNT, amount_minor=minor, currency=inv.currency),
        ],
        cause_event_ids=(str(event_id),),
        period=None,
        memo=f"credit note {note_id} on invoice {invoice_id} ({inv.period}): {reason}",
    )
    now = datetime.now(UTC)
    store.append(
        [
            make_envelope(
                note,
                event_id=event_id,
                stream=stream,
                occurred_at=now,
                observed_at=now,
                source=principal,
            ),
            transaction_envelope(txn, now),
        ],
        expected_versions={stream: version},
    )
    return CreditResult(note, created=True)


def _period_credited(store: EventStore, workspace: str, period: str) -> int:
    """Minor units credited on every invoice of ``workspace``'s ``period``, voided included."""
    with store.snapshot() as uow:
        value = uow.connection.execute(
            text(
                "SELECT COALESCE(sum(credited_minor), 0) FROM billing_invoices "
                "WHERE workspace = :w AND period = :p"
            ),
            {"w": workspace, "p": period},
        ).scalar_one()
    return int(value)


def _existing_note(store: EventStore, note_id: str) -> CreditNoteIssued | None:
    with store.snapshot() as uow:
        row = (
            uow.connection.execute(
                text(
                    "SELECT credit_note_id, invoice_id, amount_minor, currency, reason "
                    "FROM billing_credit_notes WHERE credit_note_id = :n"
                ),
                {"n": note_id},
            )
            .mappings()
            .first()
        )
    return None if row is None else CreditNoteIssued.model_validate(dict(row))
