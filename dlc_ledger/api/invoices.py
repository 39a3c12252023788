"""``/v1/invoices`` and ``/v1/invoices/{invoice_id}``: invoices and their lines, as
``dlc-ledger invoices list|show`` read them.

A ``workspace:<id>`` token's workspaces are a condition of the query
(:func:`projections.billing.invoice_pages.invoice_page`,
:func:`projections.billing.find_invoice`): another workspace's invoice is
neither listed nor found (404). Money as ``*_minor`` + currency + scale + ``*_display``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from dlc_ledger.api.auth import CurrentPrincipal
from dlc_ledger.api.csv_responses import CSV_RESPONSES, FormatQuery, csv_response, wants_csv
from dlc_ledger.api.freshness import with_freshness
from dlc_ledger.api.listing import CursorQuery, LimitQuery, listing, plain
from dlc_ledger.api.models_billing import InvoiceDetail, InvoicePage
from dlc_ledger.api.problems import PROBLEM_RESPONSES
from dlc_ledger.presenters import money_fields
from projections.billing import currency_scales, invoice_detail, invoice_page

__all__ = ["InvoiceStatus", "router"]

router = APIRouter(
    prefix="/v1/invoices",
    tags=["invoices"],
    responses={**PROBLEM_RESPONSES, **CSV_RESPONSES},
)


class InvoiceStatus(StrEnum):
    issued = "issued"
    voided = "voided"


@router.get(
    "",
    response_model=InvoicePage,
    response_model_exclude_unset=True,
    summary="Invoices by period and workspace, a page",
)
def get_invoices(
    request: Request,
    principal: CurrentPrincipal,
    workspace: str | None = None,
    period: Annotated[
        str | None, Query(pattern=r"^\d{4}-(0[1-9]|1[0-2])$", description="YYYY-MM.")
    ] = None,
    status: InvoiceStatus | None = None,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    """Issued and voided invoices in (period, workspace, issued_at) order; ``issued_at``
    is cluster time (the billing run's now), ``recorded_at`` store time."""
    store = request.app.state.store
    with store.reading() as conn:
        page = invoice_page(
            conn,
            workspace=workspace,
            period=period,
            status=None if status is None else status.value,
            limit=limit,
            cursor=cursor,
            workspaces=principal.scope,
        )
        scale_of = currency_scales(conn)
    items = [money_fields(row, scale_of) for row in page.rows]
    return listing(request, items, page.next_cursor, name="invoices", fmt=fmt)


@router.get(
    "/{invoice_id}",
    response_model=InvoiceDetail,
    response_model_exclude_unset=True,
    summary="One invoice with its lines, credit notes, payments and the credit applied",
)
def get_invoice(
    request: Request, principal: CurrentPrincipal, invoice_id: str, fmt: FormatQuery = None
) -> dict[str, Any] | Response:
    """The ``invoices show --format json`` document; as CSV, its lines."""
    store = request.app.state.store
    found = invoice_detail(store, invoice_id, workspaces=principal.scope)
    with store.reading() as conn:
        scale_of = currency_scales(conn)
    currency = found.header["currency"]
    lines = [money_fields({**line, "currency": currency}, scale_of) for line in found.lines]
    if wants_csv(request, fmt):
        return csv_response(request, plain(lines), name=f"invoice-{invoice_id}", next_cursor=None)
    header = money_fields(found.header, scale_of)
    header["lines"] = lines
    header["credit_notes"] = [money_fields(note, scale_of) for note in found.credit_notes]
    header["payments"] = [money_fields(p, scale_of) for p in found.payments]
    header["credit_applied"] = [money_fields(a, scale_of) for a in found.credit_applied]
    header["returned_to_credit"] = [money_fields(r, scale_of) for r in found.returned_to_credit]
    out: dict[str, Any] = plain(header)
    return with_freshness(request, out)
