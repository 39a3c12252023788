"""The billing context's use cases, in one place: one billing tick at an instant
(:mod:`.ticks`), publishing prices (:mod:`.prices`: a price book, a spot price) and the
corrections of an issued invoice (:mod:`.invoices`: void, credit note), payments
(:mod:`.payments`) and period locks (:mod:`.periods`: close a month, list them). Rating, accrual,
period close and the corrections themselves are the context's process steps
(:mod:`processes.billing`, with their result types); reading an invoice, a report or the
books is its view's (:mod:`projections.billing`), which the edges call directly."""

from dlc_ledger.services.billing.invoices import issue_credit_note, void_invoice
from dlc_ledger.services.billing.payments import record_payment
from dlc_ledger.services.billing.periods import close_month, list_periods
from dlc_ledger.services.billing.prices import publish_price_book, publish_spot_price
from dlc_ledger.services.billing.ticks import tick

__all__ = [
    "close_month",
    "issue_credit_note",
    "list_periods",
    "publish_price_book",
    "publish_spot_price",
    "record_payment",
    "tick",
    "void_invoice",
]
