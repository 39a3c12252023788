"""``/v1/ledger/periods``: every month open or locked, as ``dlc-ledger billing periods``;
``/v1/ledger/periods/{period}/close``: close (lock) a month, as ``dlc-ledger billing close``.

Both are finance's (docs/finance.md, "Period locks"): reading for ``admin``, ``finance`` and
``auditor``, closing for ``admin`` and ``finance`` (403 for the others, workspace tokens
included: a close locks every workspace's month). The list is the CLI's one read
(:func:`dlc_ledger.services.billing.list_periods`); the close its use case
(:func:`dlc_ledger.services.billing.close_month`): one billing tick at the instant, the
``PeriodClosed``, the month's invoices issued at once. A new close is a 201, a repeat (the
month was closed already) or a dry run a 200; a malformed period is a 422, one that has
not ended by the instant a 400, an instant beyond the cluster clock without ``force`` a 409.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request, Response
from pydantic import Field, StrictBool

from dlc_ledger.api.auth import event_source, require_roles
from dlc_ledger.api.csv_responses import CSV_RESPONSES, FormatQuery
from dlc_ledger.api.freshness import with_freshness
from dlc_ledger.api.listing import CursorQuery, LimitQuery, listing, page_of, plain
from dlc_ledger.api.models import Freshness, Strict, Timestamp
from dlc_ledger.api.models_subscriptions import DryRun, FreeText, WriteInstant
from dlc_ledger.api.problems import PROBLEM_RESPONSES, Problem
from dlc_ledger.services.access import Principal
from dlc_ledger.services.billing import close_month, list_periods
from projections.freshness import read_freshness

__all__ = ["router"]

router = APIRouter(prefix="/v1/ledger/periods", tags=["ledger"], responses=PROBLEM_RESPONSES)

Bookkeeper = Annotated[Principal, Depends(require_roles("admin", "finance", "auditor"))]
Closer = Annotated[Principal, Depends(require_roles("admin", "finance"))]
PeriodPath = Annotated[
    str, Path(pattern=r"^\d{4}-(0[1-9]|1[0-2])$", description="The month, YYYY-MM.")
]

_CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {
        "model": Problem,
        "content": {"application/problem+json": {}},
        "description": "Conflict (an instant beyond the latest cluster time without force)",
    }
}


class PeriodRow(Strict):
    """A month with postings, invoices or a close (``billing periods --format json``)."""

    period: str
    status: str = Field(description="locked (closed for every workspace) or open.")
    workspaces: int = Field(description="How many workspaces posted to it.")
    invoices: int = Field(description="Its issued invoices.")
    closed_at: Timestamp | None
    closed_by: str | None
    reason: str | None


class PeriodPage(Strict):
    items: list[PeriodRow]
    next_cursor: str | None = None
    freshness: Freshness | None = None


class CloseRequest(Strict):
    """``billing close``'s options."""

    at: WriteInstant = None
    force: StrictBool = Field(
        default=False, description="Allow an ``at`` beyond the latest cluster time observed."
    )
    reason: FreeText = Field(default="", description="Why (kept on the PeriodClosed).")
    dry_run: DryRun = False


class ClosedInvoice(Strict):
    invoice_id: str
    workspace: str
    period: str


class CloseResult(Strict):
    """What the close did: ``closed`` (the month locked now; false: it was locked already),
    the workspaces with postings in it (whose month is locked), the invoices it issued. A
    dry run: what it would do, from the books as they stand (the invoices due before its
    billing tick, which may rate more)."""

    period: str
    at: Timestamp = Field(description="The cluster instant of the close.")
    closed: bool
    workspaces: list[str]
    invoices: list[ClosedInvoice]
    dry_run: bool
    freshness: Freshness | None = None


@router.get(
    "",
    response_model=PeriodPage,
    response_model_exclude_unset=True,
    responses=CSV_RESPONSES,
    summary="Every month, open or locked (roles admin, finance, auditor)",
)
def get_periods(
    request: Request,
    _principal: Bookkeeper,
    limit: LimitQuery = 1000,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    """``billing periods``: each month with postings, invoices or a close, oldest first:
    ``locked`` or ``open``, how many workspaces posted to it, its issued invoices, who
    closed it, when and why."""
    rows = list_periods(request.app.state.store)
    items, following = page_of(rows, limit, cursor)
    return listing(request, items, following, name="periods", fmt=fmt)


@router.post(
    "/{period}/close",
    response_model=CloseResult,
    status_code=201,
    responses={
        200: {"model": CloseResult, "description": "Closed already (a repeat), or a dry run"},
        **_CONFLICT,
    },
    summary="Close (lock) a month and issue its invoices (roles admin, finance)",
)
def post_close(
    request: Request,
    response: Response,
    principal: Closer,
    period: PeriodPath,
    body: CloseRequest | None = None,
) -> dict[str, Any]:
    """``billing close --period``: one billing tick at ``at`` (default: the billing
    instant, as ``billing run``'s), then the month is locked for every workspace and its
    invoices issued at once (grace waived). A posting dated into it later is booked into
    the earliest open month as an adjustment naming its dates. No body: close now."""
    body = body or CloseRequest()
    store = request.app.state.store
    done = close_month(
        store, period, principal=event_source(principal), at=body.at, force=body.force,
        reason=body.reason, dry_run=body.dry_run,
    )  # fmt: skip
    if done.closed and not done.dry_run:
        response.headers["Location"] = "/v1/ledger/periods"
    else:
        response.status_code = 200
    document = {
        "period": done.period,
        "at": done.at,
        "closed": done.closed,
        "workspaces": list(done.workspaces),
        "invoices": list(done.invoices),
        "dry_run": done.dry_run,
    }
    with store.snapshot() as uow:
        request.state.freshness = read_freshness(uow)
    return with_freshness(request, plain(document))
