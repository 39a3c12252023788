"""The billing context's process steps: rate and accrue (:mod:`.rater`), close the due
periods into invoices (:mod:`.closing`), one tick of both (:mod:`.ticks`), a period closed
by hand (:mod:`.locks`), the corrections of an issued invoice, voids and credit notes
(:mod:`.corrections`), and its receivables: payments, credit balances applied, overdue
invoices (:mod:`.payments`)."""

from processes.billing.corrections import CreditResult, VoidResult, issue_credit_note, void_invoice
from processes.billing.locks import (
    DueInvoice,
    PeriodClose,
    PeriodPreview,
    check_closable,
    close_period,
    preview_close,
)
from processes.billing.payments import PaymentResult, apply_credits, mark_overdue, record_payment
from processes.billing.rater import RATER_SOURCE, RateResult, rate
from processes.billing.ticks import DEFAULT_ACCRUAL_STEP, DEFAULT_GRACE, TickResult, tick

__all__ = [
    "DEFAULT_ACCRUAL_STEP",
    "DEFAULT_GRACE",
    "RATER_SOURCE",
    "CreditResult",
    "DueInvoice",
    "PaymentResult",
    "PeriodClose",
    "PeriodPreview",
    "RateResult",
    "TickResult",
    "VoidResult",
    "apply_credits",
    "check_closable",
    "close_period",
    "issue_credit_note",
    "mark_overdue",
    "preview_close",
    "rate",
    "record_payment",
    "tick",
    "void_invoice",
]
