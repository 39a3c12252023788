"""Use cases on issued invoices, for the CLI and the API: void one, credit one.

The corrections are the billing context's process steps (:mod:`processes.billing.corrections`),
with their result types (``VoidResult``, ``CreditResult``) there; reading an invoice is the
billing view's (``find_invoice``, ``invoice_detail`` of :mod:`projections.billing`). The two
writes leave every read model at the head after their append (reads never catch up).
"""

from __future__ import annotations

from ledger.bounds import MAX_NAME, check_free_text, check_name
from ledger.store.base import EventStore
from processes import billing as room
from processes.billing import CreditResult, VoidResult
from projections.registry import catch_up_all

__all__ = ["issue_credit_note", "void_invoice"]


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
