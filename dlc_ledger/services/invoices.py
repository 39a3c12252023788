"""Use cases on issued invoices, for the CLI and the API: read one, void it, credit it.

The reads are the billing view's (:mod:`projections.billing.invoices`), the corrections
the billing context's process steps (:mod:`processes.billing.corrections`);
this façade is what the outer layer calls, so an edge never reaches into the room. The two
writes leave every read model at the head after their append (reads never catch up).
"""

from __future__ import annotations

from ledger.bounds import MAX_NAME, check_free_text, check_name
from ledger.store.base import EventStore
from processes import billing as room
from processes.billing import CreditResult, VoidResult
from projections.billing import (
    CREDIT_NOTES_ACCOUNT,
    Invoice,
    InvoiceDetail,
    find_invoice,
    invoice_detail,
)
from projections.registry import catch_up_all


def void_invoice(store: EventStore, invoice_id: str, reason: str, *, principal: str) -> VoidResult:
    """Void an issued invoice (:func:`processes.billing.void_invoice`)."""
    check_free_text(reason, "reason")
    result = room.void_invoice(store, invoice_id, reason, principal=principal)
    catch_up_all(store)
    return result


def issue_credit_note(
    store: EventStore,
    invoice_id: str,
    amount: str,
    reason: str,
    *,
    principal: str,
    idempotency_key: str | None = None,
) -> CreditResult:
    """Credit part of an issued invoice (:func:`processes.billing.issue_credit_note`)."""
    check_free_text(reason, "reason")
    if idempotency_key is not None:
        check_name(idempotency_key, "idempotency key", MAX_NAME)
    result = room.issue_credit_note(
        store, invoice_id, amount, reason, principal=principal, idempotency_key=idempotency_key
    )
    if result.created:
        catch_up_all(store)
    return result


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
