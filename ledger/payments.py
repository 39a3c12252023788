"""Payments and receivables: money received against an invoice, and what it leaves open.

A payment is a fact (``PaymentRecorded``) and a balanced transaction that moves what a
workspace owes into cash: debit ``cash/<currency>``, credit ``receivable/<workspace>``. It
never touches revenue: what was earned was booked when it was rated or ordered. A payment
beyond what the invoice still owes is an overpayment: its excess credits
``credit/<workspace>`` (a liability: money the platform holds for the workspace) instead of
the receivable, and is applied to the workspace's next open invoices (``CreditApplied``:
debit ``credit/<workspace>``, credit ``receivable/<workspace>``), each application naming
the invoice that was overpaid and the invoice it settles.

An invoice settled beyond its total (paid in full, then credited, or voided and re-issued
smaller) returns the excess to the workspace's credit balance (``InvoiceOverSettled``: debit
``receivable/<workspace>``, credit ``credit/<workspace>``), applied to the next invoices
as an overpayment is.

An invoice's open amount is its total less what was credited, paid and applied on its
period, plus what its period returned to the credit balance (a void carries them to the
re-issue, as it carries credit notes); it is overdue
once ``due_days`` have passed since its issue with money still open. Everything here is
pure: the process steps (:mod:`processes.billing.payments`) read and append.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ledger.accounts import balanced_transaction, receivable_account
from ledger.bounds import MAX_INT
from ledger.errors import Invalid
from ledger.events import LedgerTransactionPosted, Posting
from ledger.ids import deterministic_id
from ledger.money import format_minor, from_minor, parse_decimal, to_minor

__all__ = [
    "CASH",
    "CREDIT",
    "DEFAULT_DUE_DAYS",
    "InvoiceBalance",
    "application_id",
    "application_transaction",
    "cash_account",
    "credit_account",
    "over_settlement_id",
    "parse_amount",
    "payment_id",
    "payment_transaction",
    "return_transaction",
    "split_payment",
]

#: digits, at most one point, an optional sign: no exponent, no spaces inside, bounded length
_PLAIN = re.compile(r"\s*[+-]?[0-9]{1,30}(\.[0-9]{1,30})?\s*")

CASH = "cash"
CREDIT = "credit"
#: Days from an invoice's issue until money still open on it is overdue
#: (setting ``DLC_INVOICE_DUE_DAYS``).
DEFAULT_DUE_DAYS = 30


def cash_account(currency: str) -> str:
    """Where received money is: ``cash/<currency>`` (one bank account per currency)."""
    return f"{CASH}/{currency}"


def credit_account(workspace: str) -> str:
    """A workspace's credit balance (overpayments not applied yet): ``credit/<workspace>``,
    a liability (its balance is negative: credits are negative)."""
    if not workspace:
        raise Invalid("workspace must not be empty")
    return f"{CREDIT}/{workspace}"


def parse_amount(amount: str, scale: int, currency: str) -> int:
    """``amount`` (currency units, ``"1200.50"``) in minor units; refused unless positive
    and exact at the currency's scale (``1.005`` USD is not stored as ``1.00``)."""
    if not _PLAIN.fullmatch(amount):
        raise Invalid(f"amount {amount[:40]!r} is not a plain decimal number (e.g. 1200.50)")
    try:
        value = parse_decimal(amount, what="amount")
    except ValueError as exc:
        raise Invalid(str(exc)) from None
    minor = to_minor(value, scale)
    if minor > MAX_INT:
        raise Invalid(
            f"amount {amount} is beyond the largest amount the ledger holds "
            f"({format_minor(MAX_INT, scale, currency)})"
        )
    if from_minor(minor, scale) != value:
        raise Invalid(
            f"amount {amount} has more decimals than {currency} allows (scale {scale}): "
            f"it would be stored as {format_minor(minor, scale, currency)}"
        )
    if minor <= 0:
        raise Invalid(f"a payment amount must be positive, got {amount}")
    return minor


def payment_id(key: str) -> str:
    """A payment's id from its idempotency key (default: the bank reference)."""
    return str(deterministic_id("payment", key))


def split_payment(amount_minor: int, open_minor: int) -> tuple[int, int]:
    """(applied, excess): the part that settles the invoice's open amount, and the rest."""
    if amount_minor <= 0:
        raise Invalid("a payment amount must be positive")
    applied = min(amount_minor, max(open_minor, 0))
    return applied, amount_minor - applied


def payment_transaction(
    the_payment_id: str,
    invoice_id: str,
    workspace: str,
    currency: str,
    applied_minor: int,
    excess_minor: int,
    *,
    reference: str,
    cause_event_ids: tuple[str, ...] = (),
) -> LedgerTransactionPosted:
    """Debit cash the whole amount; credit the receivable the applied part and the
    workspace's credit balance the excess. No period: a payment is on no usage invoice."""
    postings = []
    if applied_minor:
        postings.append(
            Posting(
                account=receivable_account(workspace), amount_minor=-applied_minor,
                currency=currency,
            )
        )  # fmt: skip
    if excess_minor:
        postings.append(
            Posting(account=credit_account(workspace), amount_minor=-excess_minor,
                    currency=currency)
        )  # fmt: skip
    postings.append(
        Posting(
            account=cash_account(currency), amount_minor=applied_minor + excess_minor,
            currency=currency,
        )
    )  # fmt: skip
    over = f", {excess_minor} minor units to the credit balance" if excess_minor else ""
    return balanced_transaction(
        str(deterministic_id("txn-payment", the_payment_id)),
        postings,
        cause_event_ids=cause_event_ids,
        period=None,
        memo=f"payment {the_payment_id} ({reference}) on invoice {invoice_id}{over}",
    )


def application_id(the_payment_id: str, invoice_id: str) -> str:
    """One application per (overpayment, invoice it settles): a retried tick adds nothing."""
    return str(deterministic_id("credit-application", the_payment_id, invoice_id))


def application_transaction(
    the_application_id: str,
    workspace: str,
    currency: str,
    amount_minor: int,
    *,
    from_invoice_id: str,
    to_invoice_id: str,
    cause_event_ids: tuple[str, ...] = (),
) -> LedgerTransactionPosted:
    """Debit the workspace's credit balance, credit its receivable: the overpayment of
    ``from_invoice_id`` settles ``amount_minor`` of ``to_invoice_id``."""
    if amount_minor <= 0:
        raise Invalid("an application must be positive")
    return balanced_transaction(
        str(deterministic_id("txn-credit-application", the_application_id)),
        [
            Posting(
                account=receivable_account(workspace),
                amount_minor=-amount_minor,
                currency=currency,
            ),
            Posting(
                account=credit_account(workspace), amount_minor=amount_minor, currency=currency
            ),
        ],
        cause_event_ids=cause_event_ids,
        period=None,
        memo=(
            f"credit from the overpayment of invoice {from_invoice_id} applied to invoice "
            f"{to_invoice_id}"
        ),
    )


def over_settlement_id(invoice_id: str, settled_minor: int) -> str:
    """One return per (invoice, what its period had settled): a re-run adds nothing, a
    further settlement (another credit note, a smaller re-issue) a new one."""
    return str(deterministic_id("over-settlement", invoice_id, str(settled_minor)))


def return_transaction(
    the_settlement_id: str,
    invoice_id: str,
    workspace: str,
    currency: str,
    amount_minor: int,
    *,
    cause_event_ids: tuple[str, ...] = (),
) -> LedgerTransactionPosted:
    """Debit the workspace's receivable, credit its credit balance: what ``invoice_id``'s
    period was settled beyond its total is no longer owed the other way, it is held for
    the workspace's next invoices."""
    if amount_minor <= 0:
        raise Invalid("a return to the credit balance must be positive")
    return balanced_transaction(
        str(deterministic_id("txn-over-settlement", the_settlement_id)),
        [
            Posting(
                account=receivable_account(workspace), amount_minor=amount_minor,
                currency=currency,
            ),
            Posting(
                account=credit_account(workspace), amount_minor=-amount_minor,
                currency=currency,
            ),
        ],
        cause_event_ids=cause_event_ids,
        period=None,
        memo=f"invoice {invoice_id} settled beyond its total: the excess to the credit balance",
    )  # fmt: skip


@dataclass(frozen=True)
class InvoiceBalance:
    """What an invoice's period owes: its total, less credited, paid and applied, plus what
    was returned to the credit balance (settled beyond the total)."""

    total_minor: int
    credited_minor: int
    paid_minor: int
    applied_minor: int
    returned_minor: int = 0

    @property
    def settled_minor(self) -> int:
        return self.credited_minor + self.paid_minor + self.applied_minor

    @property
    def excess_minor(self) -> int:
        """What the period was settled beyond its total and has not returned yet."""
        return max(self.settled_minor - self.returned_minor - self.total_minor, 0)

    @property
    def open_minor(self) -> int:
        left = self.total_minor - self.settled_minor + self.returned_minor
        return max(left, 0)
