"""Pay-as-you-go billing, end to end, in one room: what a price becomes on an invoice.

Money enters only as events, and every statement on the billing tables is here:

- ``tables``: the read model's tables; ``projection``: folds occupancy facts, prices,
  postings, invoices, voids and credit notes into them (``catch_up_on`` inside a caller's
  transaction);
- ``reads``: the price schedule and occupancies back as domain values;
- ``rater``: rates occupancies and appends ``LedgerTransactionPosted`` (exactly once);
- ``closing``: closes due periods, one ``InvoiceIssued`` per workspace and period;
- ``ticks``: one scheduled tick at a cluster instant (rate, accrue, close);
- ``invoices``: an invoice read, voided, credited;
- ``reports``, ``invoice_pages``: the finance reports, the invoice and credit-note lists;
  ``top``: a window's costliest groups and its total, ordered and cut in SQL;
  ``replicas``: how each replica of a service was billed (prepaid or spilled);
- ``locks``: which periods are closed (``PeriodClosed``) or invoiced: locked;
- ``receivables``: what invoices still owe (paid, applied, open, payment status), the
  payments and the credit balances;
- ``balances``: the trial balance and receivables by age (by what is still open);
  ``journal``: a month's postings as a general ledger imports them; ``trails``: an
  invoice line's audit trail back to the cluster facts.

The pure rules (rating, accounts, rounding, invoice building) are in ``ledger``; the
use cases the CLI and the API call are in ``dlc_ledger.services.billing`` (a tick, prices,
an invoice's corrections); the APScheduler loop is ``consumers.billing_scheduler``.
"""

from __future__ import annotations

from projections.billing.balances import AGE_BUCKETS, read_books
from projections.billing.invoice_pages import credit_note_page, invoice_page
from projections.billing.invoices import (
    CREDIT_NOTES_ACCOUNT,
    Invoice,
    InvoiceDetail,
    find_invoice,
    invoice_detail,
)
from projections.billing.journal import JOURNAL_COLUMNS, Journal, period_bounds, read_journal
from projections.billing.locks import (
    closed_periods,
    invoice_keys,
    period_locks,
    period_rows,
    period_workspaces,
)
from projections.billing.projection import BillingProjection, catch_up_billing, catch_up_on
from projections.billing.reads import (
    WORKLOAD_OF_OCCUPANCY,
    ScaleOf,
    billing_currency,
    currency_scales,
    load_schedule,
    occupancy_from_row,
)
from projections.billing.receivables import (
    INVOICE_FIGURES,
    PAYMENT_STATUSES,
    credit_balances,
    invoice_payments,
    open_credits,
    open_invoices,
    payment_page,
    period_balance,
)
from projections.billing.replicas import replica_billing
from projections.billing.reports import (
    GROUP_KEYS,
    ReportWindow,
    Source,
    cost_report,
    cost_row,
    invoice_lines,
    job_cost,
    parse_group_by,
    usage_report,
)
from projections.billing.top import cost_top
from projections.billing.trails import (
    InvoiceTrail,
    largest_gpu_line_trail,
    subscription_lines,
    trace_span_seconds,
)

__all__ = [
    "AGE_BUCKETS",
    "CREDIT_NOTES_ACCOUNT",
    "GROUP_KEYS",
    "INVOICE_FIGURES",
    "JOURNAL_COLUMNS",
    "PAYMENT_STATUSES",
    "WORKLOAD_OF_OCCUPANCY",
    "BillingProjection",
    "Invoice",
    "InvoiceDetail",
    "InvoiceTrail",
    "Journal",
    "ReportWindow",
    "ScaleOf",
    "Source",
    "billing_currency",
    "catch_up_billing",
    "catch_up_on",
    "closed_periods",
    "cost_report",
    "cost_row",
    "cost_top",
    "credit_balances",
    "credit_note_page",
    "currency_scales",
    "find_invoice",
    "invoice_detail",
    "invoice_keys",
    "invoice_lines",
    "invoice_page",
    "invoice_payments",
    "job_cost",
    "largest_gpu_line_trail",
    "load_schedule",
    "occupancy_from_row",
    "open_credits",
    "open_invoices",
    "parse_group_by",
    "payment_page",
    "period_balance",
    "period_bounds",
    "period_locks",
    "period_rows",
    "period_workspaces",
    "read_books",
    "read_journal",
    "replica_billing",
    "subscription_lines",
    "trace_span_seconds",
    "usage_report",
]
