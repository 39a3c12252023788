"""Use case for the CLI and the API: record a payment against an invoice.

The step itself (the split into what settles the invoice and what goes to the
workspace's credit balance, the idempotency by key) is the billing context's
(:func:`processes.billing.record_payment`); reading payments is its view's
(:func:`projections.billing.payment_page`). After an append, every read model is brought
to the head, so the caller reads its own write.
"""

from __future__ import annotations

from datetime import datetime

from ledger.bounds import MAX_NAME, check_name
from ledger.store.base import EventStore
from processes import billing as room
from processes.billing import PaymentResult
from projections.registry import catch_up_all

__all__ = ["record_payment"]


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
    against an issued invoice (:func:`processes.billing.record_payment`)."""
    check_name(reference, "reference", MAX_NAME)
    if key is not None:
        check_name(key, "idempotency key", MAX_NAME)
    result = room.record_payment(
        store,
        invoice_id,
        amount,
        received_at,
        reference,
        principal=principal,
        key=key,
        dry_run=dry_run,
    )
    if result.created:
        catch_up_all(store)
    return result
