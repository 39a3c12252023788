"""``/v1/usage`` and ``/v1/cost``: ``dlc-ledger report usage|cost`` over HTTP.

The same read functions, group-bys and window (:mod:`projections.billing.reports`); a
workspace-scoped token's workspaces go into the report's SQL (``ReportWindow``). Money:
each ``<name>_minor`` integer stays, with the row's ``currency`` and ``scale``, a
``<name>_display`` string for people (``1,267.21 USD``) and ``<name>_minor_precise`` as
a decimal string (sub-minor precision, as posted). A report is one table: its pages
hold up to 1,000 rows (default 1,000, so a chart reads it in one call), CSV as every list.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from dlc_ledger.api.auth import CurrentPrincipal
from dlc_ledger.api.csv_responses import CSV_RESPONSES, FormatQuery
from dlc_ledger.api.listing import CursorQuery, Instant, listed_report
from dlc_ledger.api.models import CostRows, UsageRows
from dlc_ledger.api.problems import PROBLEM_RESPONSES
from dlc_ledger.api.windows import check_span, finest_step
from dlc_ledger.presenters import money_fields
from dlc_ledger.services.access import Principal
from dlc_ledger.services.errors import InvalidRequest
from dlc_ledger.services.subscriptions import add_prepaid, check_keys
from ledger.store.base import Connection
from projections.billing import (
    GROUP_KEYS,
    ReportWindow,
    cost_report,
    currency_scales,
    parse_group_by,
    usage_report,
)

__all__ = [
    "AsOfQuery",
    "CostSource",
    "WindowFromQuery",
    "WindowToQuery",
    "report_window",
    "router",
]

router = APIRouter(prefix="/v1", tags=["reports"], responses={**PROBLEM_RESPONSES, **CSV_RESPONSES})

_GROUP = Query(alias="group_by", description=f"Comma-separated, of: {', '.join(GROUP_KEYS)}.")
_FROM = Query(alias="from", description="Window start, inclusive (ISO 8601 with zone).")
_TO = Query(alias="to", description="Window end, exclusive; default the cluster clock.")
_AS_OF = Query(alias="as_of", description="Only what was recorded by then (store time).")
#: a report's window, as every route over the billing reports takes it
WindowFromQuery = Annotated[Instant | None, _FROM]
WindowToQuery = Annotated[Instant | None, _TO]
AsOfQuery = Annotated[Instant | None, _AS_OF]
_WITH_PREPAID = Query(
    description="Add prepaid_minor: the subscriptions' recognised revenue of the window "
    "attributed by guarantee (docs/subscriptions.md); group by workspace, quota, month only."
)
#: a report is one table: its page is as large as a page may be, so a chart reads it whole
_REPORT_LIMIT = Query(ge=1, le=1000, description="Rows per page (1 to 1,000).")


class CostSource(StrEnum):
    auto = "auto"
    ledger = "ledger"
    rated = "rated"


def report_window(
    principal: Principal,
    start: datetime | None,
    end: datetime | None,
    as_of: datetime | None,
    keys: Sequence[str] = (),
) -> ReportWindow:
    """The report window of a request: ``[from, to)``, ``as_of``, and the token's scope
    (its workspaces go into the report's SQL); a window that does not end after it
    starts, or spans more than its group keys ``keys`` allow (:mod:`dlc_ledger.api.windows`),
    is a 400."""
    if start is not None and end is not None and end <= start:
        raise InvalidRequest("to must be after from")
    step = finest_step(keys)
    check_span(start, end, step, what="a report's window" if step is None else f"group_by={step}")
    scope = principal.scope
    return ReportWindow(
        start=start,
        end=end,
        as_of=as_of,
        workspaces=None if scope is None else tuple(sorted(scope)),
    )


def _keys(group_by: str) -> tuple[str, ...]:
    return parse_group_by(group_by)


@router.get(
    "/usage",
    response_model=UsageRows,
    response_model_exclude_unset=True,
    responses=CSV_RESPONSES,
    summary="Occupied usage, grouped",
)
def get_usage(
    request: Request,
    principal: CurrentPrincipal,
    group_by: Annotated[str, _GROUP] = "workspace",
    start: WindowFromQuery = None,
    end: WindowToQuery = None,
    as_of: AsOfQuery = None,
    limit: Annotated[int, _REPORT_LIMIT] = 1000,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    keys = _keys(group_by)
    window = report_window(principal, start, end, as_of, keys)
    return listed_report(
        request,
        lambda conn: usage_report(conn, keys, window),
        name="usage",
        limit=limit,
        cursor=cursor,
        fmt=fmt,
    )


@router.get(
    "/cost",
    response_model=CostRows,
    response_model_exclude_unset=True,
    responses=CSV_RESPONSES,
    summary="Cost, grouped (ledger or rated)",
)
def get_cost(
    request: Request,
    principal: CurrentPrincipal,
    group_by: Annotated[str, _GROUP] = "workspace",
    start: WindowFromQuery = None,
    end: WindowToQuery = None,
    as_of: AsOfQuery = None,
    source: CostSource = CostSource.auto,
    net_credits: bool = False,
    with_prepaid: Annotated[bool, _WITH_PREPAID] = False,
    limit: Annotated[int, _REPORT_LIMIT] = 1000,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    keys = _keys(group_by)
    window = report_window(principal, start, end, as_of, keys)
    if with_prepaid:
        check_keys(keys)
    store = request.app.state.store

    def read(conn: Connection) -> list[dict[str, Any]]:
        rows = cost_report(conn, keys, window, source=source.value, net_credits=net_credits)
        if with_prepaid:
            rows = add_prepaid(store, rows, keys, window)
        scale_of = currency_scales(conn)
        return [money_fields(row, scale_of) for row in rows]

    return listed_report(request, read, name="cost", limit=limit, cursor=cursor, fmt=fmt)
