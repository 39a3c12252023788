"""Use cases on issued invoices, for the CLI and the API: read one, void it, credit it.

The rules and every statement are in the billing room (:mod:`projections.billing.invoices`);
this façade is what the outer layer calls, so an edge never reaches into the room.
"""

from __future__ import annotations

from projections.billing.invoices import (
    CREDIT_NOTES_ACCOUNT,
    CreditResult,
    Invoice,
    InvoiceDetail,
    VoidResult,
    find_invoice,
    invoice_detail,
    issue_credit_note,
    void_invoice,
)

__all__ = [
    "CREDIT_NOTES_ACCOUNT",
    "CreditResult",
    "Invoice",
    "InvoiceDetail",
    "VoidResult",
    "find_invoice",
    "invoice_detail",
    "issue_credit_note",
    "void_invoice",
]
