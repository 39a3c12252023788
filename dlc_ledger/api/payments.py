"""``/v1/payments``: record a payment against an invoice (roles admin, finance) and list
payments, as ``dlc-ledger payments record|list`` do.

A write is finance's: a workspace token (or an auditor's) is refused (403). Bad input is
a problem document: an unknown invoice 404, a voided one or a key reused for another
payment 409, a non-positive amount or one with more decimals than the currency's scale
400. A repeat of a payment (same key, same figures) is a 200 naming the payment already
recorded; a new one a 201 with ``Location``. Money as ``*_minor`` + currency + scale +
``*_display``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from dlc_ledger.api.auth import event_source, require_roles
from dlc_ledger.api.csv_responses import CSV_RESPONSES, FormatQuery
from dlc_ledger.api.freshness import with_freshness
from dlc_ledger.api.listing import CursorQuery, LimitQuery, listing, plain
from dlc_ledger.api.models_billing import PaymentPage, PaymentRequest, PaymentResult
from dlc_ledger.api.problems import PROBLEM_RESPONSES, Problem
from dlc_ledger.presenters import money_fields
from dlc_ledger.services.access import Principal
from dlc_ledger.services.billing import record_payment
from projections.billing import currency_scales, find_invoice, payment_page
from projections.freshness import read_freshness

__all__ = ["router"]

router = APIRouter(prefix="/v1/payments", tags=["invoices"], responses=PROBLEM_RESPONSES)

Reader = Annotated[Principal, Depends(require_roles("admin", "finance", "auditor"))]
Writer = Annotated[Principal, Depends(require_roles("admin", "finance"))]

_CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {
        "model": Problem,
        "content": {"application/problem+json": {}},
        "description": "Conflict (a voided invoice; a key reused for another payment)",
    }
}


#: what a write's answer shows of the payment (the model's fields but its transaction)
_SHOWN = {
    "payment_id", "invoice_id", "workspace", "reference", "currency", "amount_minor",
    "applied_minor", "excess_minor", "received_at",
}  # fmt: skip


@router.post(
    "",
    response_model=PaymentResult,
    status_code=201,
    responses={200: {"model": PaymentResult, "description": "A repeat of the key"}, **_CONFLICT},
    summary="Record a payment against an invoice (roles admin, finance)",
)
def post_payment(
    request: Request, response: Response, principal: Writer, body: PaymentRequest
) -> dict[str, Any]:
    """``payments record``: what the invoice still owes is settled, anything beyond it is
    kept as the workspace's credit balance (applied to its next invoices by the billing
    tick). 201 with ``Location`` when recorded, 200 for a repeat of its key or a dry run."""
    store = request.app.state.store
    result = record_payment(
        store, body.invoice_id, body.amount, body.at, body.reference,
        principal=event_source(principal), key=body.idempotency_key, dry_run=body.dry_run,
    )  # fmt: skip
    p = result.payment
    if result.created:
        response.headers["Location"] = f"/v1/payments?invoice={p.invoice_id}"
    else:
        response.status_code = 200
    row = p.model_dump(include=_SHOWN)
    with store.snapshot() as uow:
        request.state.freshness = read_freshness(uow)
    document = {
        "payment": money_fields(row, lambda _currency: result.scale),
        "created": result.created,
        "dry_run": result.dry_run,
    }
    return with_freshness(request, plain(document))


@router.get(
    "",
    response_model=PaymentPage,
    response_model_exclude_unset=True,
    responses=CSV_RESPONSES,
    summary="Payments, oldest first (roles admin, finance, auditor)",
)
def get_payments(
    request: Request,
    principal: Reader,
    invoice: str | None = None,
    workspace: str | None = None,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    """``payments list``: each payment with its invoice's period and how it was split
    (``applied_minor`` settled the invoice, ``excess_minor`` went to the credit balance)."""
    store = request.app.state.store
    if invoice is not None:
        find_invoice(store, invoice)  # an unknown invoice is a 404, not an empty page
    with store.reading() as conn:
        page = payment_page(
            conn, invoice_id=invoice, workspace=workspace, limit=limit, cursor=cursor,
            workspaces=principal.scope,
        )  # fmt: skip
        scale_of = currency_scales(conn)
    items = [money_fields(row, scale_of) for row in page.rows]
    return listing(request, items, page.next_cursor, name="payments", fmt=fmt)
