"""Payments received, overpayments applied, invoices gone overdue (the billing context's
receivables steps).

- :func:`record_payment`: ``PaymentRecorded`` on ``invoice/<id>`` and its balanced
  transaction (debit ``cash/<currency>``; credit ``receivable/<ws>`` what the invoice
  still owed, ``credit/<ws>`` any excess). Decided under the store's append lock after
  the billing projection is brought to the head, so two payments racing for one invoice
  split what it owes once. Idempotent by its key (default: the reference): a retry with
  the same figures adds nothing, a key reused for another payment is refused.
- :func:`return_over_settlements`: the billing tick's step before ``apply_credits``: an
  issued invoice whose period was settled beyond its total (paid, then credited, or
  voided and re-issued smaller) returns the excess to the workspace's credit balance,
  ``InvoiceOverSettled`` (debit ``receivable/<ws>``, credit ``credit/<ws>``), id from the
  invoice and what its period had settled: a re-run adds nothing, a further excess only
  the difference; ``apply_credits`` then applies it like an overpayment.
- :func:`apply_credits`: after a period close (the billing tick calls it), each
  workspace's credit balance settles its open invoices, oldest first: one
  ``CreditApplied`` per (overpayment, invoice), naming both invoices.
- :func:`mark_overdue`: ``InvoiceOverdue`` once per invoice still open ``due_days``
  after its issue (event id from the invoice: appended once however often ticks run).

Pure rules (amounts, splits, transactions) are :mod:`ledger.payments`'.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import text

from ledger.accounts import transaction_envelope
from ledger.envelopes import Envelope, make_envelope
from ledger.errors import Conflict, Invalid, NotFound
from ledger.events import CreditApplied, InvoiceOverdue, InvoiceOverSettled, PaymentRecorded
from ledger.ids import deterministic_id
from ledger.money import default_scale, format_minor
from ledger.payments import (
    DEFAULT_DUE_DAYS,
    InvoiceBalance,
    application_id,
    application_transaction,
    over_settlement_id,
    parse_amount,
    payment_id,
    payment_transaction,
    return_transaction,
    split_payment,
)
from ledger.store.base import EventStore
from projections.billing import (
    INVOICE_FIGURES,
    catch_up_on,
    load_schedule,
    open_credits,
    open_invoices,
    period_balance,
)

__all__ = [
    "DUE_DAYS_ENV",
    "PaymentResult",
    "apply_credits",
    "invoice_due_days",
    "mark_overdue",
    "record_payment",
    "return_over_settlements",
]

#: The setting: days from an invoice's issue until money still open on it is overdue.
DUE_DAYS_ENV = "DLC_INVOICE_DUE_DAYS"


def invoice_due_days() -> int:
    """``DLC_INVOICE_DUE_DAYS`` (default 30): a whole number of days, at least 0."""
    raw = os.environ.get(DUE_DAYS_ENV, "").strip()
    if not raw:
        return DEFAULT_DUE_DAYS
    try:
        days = int(raw)
    except ValueError:
        raise Invalid(f"{DUE_DAYS_ENV} must be a whole number of days, got {raw!r}") from None
    if days < 0:
        raise Invalid(f"{DUE_DAYS_ENV} must be at least 0, got {days}")
    return days


#: The ``source`` of what a tick appends here (applications, overdue marks).
RECEIVABLES_SOURCE = "scheduler/receivables"


@dataclass(frozen=True)
class PaymentResult:
    payment: PaymentRecorded
    created: bool  # False: the key's payment already existed, or a dry run (nothing appended)
    scale: int
    dry_run: bool = False


def record_payment(
    store: EventStore,
    invoice_id: str,
    amount: str,
    received_at: datetime,
    reference: str,
    *,
    principal: str,
    key: str | None = None,
    dry_run: bool = False,
) -> PaymentResult:
    """Record ``amount`` (currency units, ``"1200.50"``) received at ``received_at``
    against ``invoice_id``; ``dry_run``: every check and the split, nothing appended."""
    if received_at.tzinfo is None:
        raise Invalid("--at must carry a time zone")
    if not reference.strip():
        raise Invalid("a payment needs a --reference")
    the_key = key if key is not None else reference
    if not the_key.strip():
        raise Invalid("--idempotency-key must not be empty")
    the_id = payment_id(the_key)
    with store.transaction() as uow:
        conn = uow.connection
        uow.lock_appends()
        catch_up_on(uow)
        inv = conn.execute(
            text(
                "SELECT i.workspace, i.currency, i.status, f.open_minor "
                f"FROM billing_invoices i {INVOICE_FIGURES} WHERE i.invoice_id = :i"
            ),
            {"i": invoice_id},
        ).first()
        if inv is None:
            raise NotFound(f"no invoice {invoice_id!r}")
        workspace, currency, status, _ = inv
        schedule = load_schedule(conn)
        scale = schedule.scale if schedule.scale is not None else default_scale(currency)
        minor = parse_amount(amount, scale, currency)
        before = conn.execute(
            text(
                "SELECT invoice_id, amount_minor, received_at, reference, applied_minor, "
                "excess_minor FROM billing_payments WHERE payment_id = :p"
            ),
            {"p": the_id},
        ).first()
        if before is not None:
            same = (before[0], int(before[1]), before[2], before[3]) == (
                invoice_id, minor, received_at, reference,
            )  # fmt: skip
            if not same:
                raise Conflict(
                    f"key {the_key!r} was used for payment {the_id} "
                    f"({format_minor(int(before[1]), scale, currency)} on invoice {before[0]}, "
                    f"reference {before[3]}, received {before[2].isoformat()}); use a new "
                    "--reference or --idempotency-key for a different payment"
                )
            payment = PaymentRecorded(
                payment_id=the_id, invoice_id=invoice_id, workspace=workspace,
                amount_minor=minor, applied_minor=int(before[4]), excess_minor=int(before[5]),
                currency=currency, reference=reference, received_at=before[2],
                transaction_id=payment_transaction_id(the_id),
            )  # fmt: skip
            return PaymentResult(payment, created=False, scale=scale, dry_run=dry_run)
        if status != "issued":
            raise Conflict(f"invoice {invoice_id} is {status}: payments go to an issued invoice")
        balance = period_balance(conn, invoice_id)
        assert balance is not None
        applied, excess = split_payment(minor, balance.open_minor)
        event_id = deterministic_id("event", "PaymentRecorded", the_id)
        txn = payment_transaction(
            the_id, invoice_id, workspace, currency, applied, excess,
            reference=reference, cause_event_ids=(str(event_id),),
        )  # fmt: skip
        payment = PaymentRecorded(
            payment_id=the_id, invoice_id=invoice_id, workspace=workspace, amount_minor=minor,
            applied_minor=applied, excess_minor=excess, currency=currency,
            reference=reference, received_at=received_at, transaction_id=txn.transaction_id,
        )  # fmt: skip
        if dry_run:
            return PaymentResult(payment, created=False, scale=scale, dry_run=True)
        uow.append(
            [
                make_envelope(
                    payment,
                    event_id=event_id,
                    stream=f"invoice/{invoice_id}",
                    occurred_at=received_at,
                    observed_at=received_at,
                    source=principal,
                ),
                transaction_envelope(txn, received_at, source=principal),
            ]
        )
    return PaymentResult(payment, created=True, scale=scale)


def payment_transaction_id(the_payment_id: str) -> str:
    """The id of a payment's transaction (as :func:`ledger.payments.payment_transaction`)."""
    return str(deterministic_id("txn-payment", the_payment_id))


def return_over_settlements(store: EventStore, now: datetime) -> tuple[str, ...]:
    """``InvoiceOverSettled`` for every issued invoice whose period was settled (credited,
    paid, applied) beyond its total and beyond what it returned already: the excess moves
    from ``receivable/<ws>`` to ``credit/<ws>``; the settlement ids appended."""
    with store.transaction() as uow:
        conn = uow.connection
        uow.lock_appends()
        catch_up_on(uow)
        rows = conn.execute(
            text(
                "SELECT i.invoice_id, i.workspace, i.period, i.currency, i.total_minor, "
                "f.period_credited, f.period_paid, f.period_applied, f.period_returned "
                f"FROM billing_invoices i {INVOICE_FIGURES} WHERE i.status = 'issued' "
                # a negative total (credits beyond the usage) is no settlement's excess
                "AND i.total_minor >= 0 AND f.period_credited + f.period_paid "
                "+ f.period_applied - f.period_returned > i.total_minor "
                "ORDER BY i.period, i.issued_at, i.invoice_id"
            )
        ).all()
        envelopes: list[Envelope] = []
        done: list[str] = []
        for invoice_id, workspace, period, currency, *figures in rows:
            balance = InvoiceBalance(*(int(v) for v in figures))
            the_id = over_settlement_id(invoice_id, balance.settled_minor)
            event_id = deterministic_id("event", "InvoiceOverSettled", the_id)
            txn = return_transaction(
                the_id, invoice_id, workspace, currency, balance.excess_minor,
                cause_event_ids=(str(event_id),),
            )  # fmt: skip
            event = InvoiceOverSettled(
                settlement_id=the_id, invoice_id=invoice_id, workspace=workspace,
                period=period, total_minor=balance.total_minor,
                settled_minor=balance.settled_minor, returned_minor=balance.excess_minor,
                currency=currency, transaction_id=txn.transaction_id,
            )  # fmt: skip
            envelopes.append(
                make_envelope(
                    event,
                    event_id=event_id,
                    stream=f"invoice/{invoice_id}",
                    occurred_at=now,
                    observed_at=now,
                    source=RECEIVABLES_SOURCE,
                )
            )
            envelopes.append(transaction_envelope(txn, now, source=RECEIVABLES_SOURCE))
            done.append(the_id)
        if envelopes:
            uow.append(envelopes, on_conflict="dead-letter")
    return tuple(done)


def apply_credits(store: EventStore, now: datetime) -> tuple[str, ...]:
    """Apply every workspace's credit balance to its open issued invoices, oldest first;
    the application ids appended."""
    done: list[str] = []
    with store.transaction() as uow:
        conn = uow.connection
        uow.lock_appends()
        catch_up_on(uow)
        credits = open_credits(conn)
        if not credits:
            return ()
        envelopes: list[Envelope] = []
        # workspace -> its open invoices, oldest first (id, currency); left_on: what each owes
        owed: dict[str, list[tuple[str, str]]] = {}
        left_on: dict[str, int] = {}
        for credit in credits:
            workspace = str(credit["workspace"])
            if workspace not in owed:
                rows = open_invoices(conn, workspace)
                owed[workspace] = [(i, c) for i, c, _ in rows]
                left_on.update((i, o) for i, _, o in rows)
            left = int(credit["left_minor"])
            for target_id, currency in owed[workspace]:
                open_minor = left_on[target_id]
                if left == 0:
                    break
                if open_minor == 0 or currency != credit["currency"]:
                    continue
                if target_id == credit["invoice_id"]:
                    continue  # its own excess: what was beyond this invoice's open amount
                amount = min(left, open_minor)
                the_id = application_id(str(credit["payment_id"]), target_id)
                event_id = deterministic_id("event", "CreditApplied", the_id)
                txn = application_transaction(
                    the_id, workspace, currency, amount,
                    from_invoice_id=str(credit["invoice_id"]), to_invoice_id=target_id,
                    cause_event_ids=(str(event_id),),
                )  # fmt: skip
                applied = CreditApplied(
                    application_id=the_id, invoice_id=target_id,
                    from_invoice_id=str(credit["invoice_id"]),
                    payment_id=str(credit["payment_id"]), workspace=workspace,
                    amount_minor=amount, currency=currency, transaction_id=txn.transaction_id,
                )  # fmt: skip
                envelopes.append(
                    make_envelope(
                        applied,
                        event_id=event_id,
                        stream=f"invoice/{target_id}",
                        occurred_at=now,
                        observed_at=now,
                        source=RECEIVABLES_SOURCE,
                    )
                )
                envelopes.append(transaction_envelope(txn, now, source=RECEIVABLES_SOURCE))
                left_on[target_id] = open_minor - amount
                left -= amount
                done.append(the_id)
        if envelopes:
            uow.append(envelopes, on_conflict="dead-letter")
    return tuple(done)


def mark_overdue(
    store: EventStore, now: datetime, *, due_days: int = DEFAULT_DUE_DAYS
) -> tuple[str, ...]:
    """``InvoiceOverdue`` for every issued invoice still open ``due_days`` after its issue
    and not marked yet; the invoice ids."""
    if due_days < 0:
        raise Invalid(f"the days an invoice is due in cannot be negative, got {due_days}")
    with store.transaction() as uow:
        conn = uow.connection
        uow.lock_appends()
        catch_up_on(uow)
        rows = conn.execute(
            text(
                "SELECT i.invoice_id, i.workspace, i.period, i.currency, i.issued_at, "
                f"f.open_minor FROM billing_invoices i {INVOICE_FIGURES} "
                "WHERE i.status = 'issued' AND i.overdue_at IS NULL AND f.open_minor > 0 "
                "AND i.issued_at + make_interval(days => :d) <= :now "
                "ORDER BY i.issued_at, i.invoice_id"
            ),
            {"d": due_days, "now": now},
        ).all()
        envelopes = []
        for invoice_id, workspace, period, currency, issued_at, open_minor in rows:
            due_at = issued_at + timedelta(days=due_days)
            envelopes.append(
                make_envelope(
                    InvoiceOverdue(
                        invoice_id=invoice_id, workspace=workspace, period=period,
                        due_at=due_at, due_days=due_days, open_minor=int(open_minor),
                        currency=currency,
                    ),
                    event_id=deterministic_id("event", "InvoiceOverdue", invoice_id),
                    stream=f"invoice/{invoice_id}",
                    occurred_at=due_at,
                    observed_at=now,
                    source=RECEIVABLES_SOURCE,
                )
            )  # fmt: skip
        if envelopes:
            uow.append(envelopes, on_conflict="dead-letter")
    return tuple(str(r[0]) for r in rows)
