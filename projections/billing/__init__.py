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
- ``balances``: the trial balance and receivables by age; ``trails``: an invoice line's
  audit trail back to the cluster facts.

The pure rules (rating, accounts, rounding, invoice building) are in ``ledger``; the
use cases the CLI and the API call are in ``dlc_ledger.services.billing`` and
``dlc_ledger.services.invoices``; the APScheduler loop is ``consumers.billing_scheduler``.
"""

from __future__ import annotations

from projections.billing.reads import load_schedule
from projections.billing.reports import ReportWindow, cost_report, job_cost, usage_report

__all__ = ["ReportWindow", "cost_report", "job_cost", "load_schedule", "usage_report"]
