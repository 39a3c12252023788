"""``/v1/quotas/tree``, ``/v1/quotas/{quota}/series`` and ``/v1/queues/{quota}``: the
quota tree at every node, a node's chartable series, and a quota's pending queue, as
``dlc-ledger quotas tree``, ``report quota-series`` and ``queue show`` read them.

A ``workspace:<id>`` token sees the quota subtree its workspaces are bound to
(:mod:`projections.quotas.scope`, a recursive CTE): the tree lists only its nodes (their
figures computed over the whole tree, as lending needs), and a quota outside it is 404
(its existence not disclosed), as is an unknown one.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from dlc_ledger.api.auth import CurrentPrincipal
from dlc_ledger.api.csv_responses import CSV_RESPONSES, FormatQuery
from dlc_ledger.api.listing import (
    AtQuery,
    CursorQuery,
    FromQuery,
    LimitQuery,
    ToQuery,
    check_window,
    listing,
    page_of,
)
from dlc_ledger.api.models_quotas import QueuePage, QuotaTreePage, SeriesPage
from dlc_ledger.api.problems import PROBLEM_RESPONSES
from dlc_ledger.api.windows import check_span
from dlc_ledger.presenters import money_fields, node_row, series_row, with_kinds
from dlc_ledger.services.dispatch import queue_page
from dlc_ledger.services.errors import NotFound
from projections.billing import ReportWindow, currency_scales
from projections.names import quota_names
from projections.quotas import (
    quota_in_scope,
    quota_nodes_at,
    series_points,
    usage_series,
    used_by_kind,
)

__all__ = ["SeriesStep", "router"]

router = APIRouter(prefix="/v1", tags=["quotas"], responses={**PROBLEM_RESPONSES, **CSV_RESPONSES})


# a chart reads a series whole, and every page recomputes it: pages as large as a
# 30-day hourly series of a few flavors, so one request serves a chart
_SERIES_LIMIT = Query(ge=1, le=10_000, description="Rows per page (1 to 10,000).")


class SeriesStep(StrEnum):
    hour = "hour"
    day = "day"


@router.get(
    "/quotas/tree",
    response_model=QuotaTreePage,
    response_model_exclude_unset=True,
    summary="Every quota node x flavor: min, max, used, borrowed, lent, lendable, queued",
)
def get_quota_tree(
    request: Request,
    principal: CurrentPrincipal,
    at: AtQuery = None,
    start: FromQuery = None,
    end: ToQuery = None,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    """With ``from``/``to``: each node's GPU-hours and cost over that window too (its
    subtree's leaves summed; ``to`` exclusive)."""
    check_window(start, end)
    check_span(start, end, None, what="the tree's window")
    window = None if start is None and end is None else ReportWindow(start=start, end=end)
    store = request.app.state.store
    with store.snapshot() as uow:
        nodes = quota_nodes_at(uow.connection, at, window, workspaces=principal.scope)
        scale_of = currency_scales(uow.connection)
        kinds = used_by_kind(uow.connection, nodes.at)[1] if nodes.at is not None else {}
    rows = [
        money_fields(
            with_kinds(
                node_row(nodes, f, with_at=True),
                kinds.get((f.usage.quota, f.usage.flavor), {}),
            ),
            scale_of,
        )
        for f in nodes.flavors
    ]
    items, following = page_of(rows, limit, cursor)
    return listing(request, items, following, name="quota-tree", fmt=fmt, at=nodes.at)


@router.get(
    "/quotas/{quota}/series",
    response_model=SeriesPage,
    response_model_exclude_unset=True,
    summary="One quota node's usage per flavor at each step of a window (a chart's series)",
)
def get_quota_series(
    request: Request,
    principal: CurrentPrincipal,
    quota: str,
    start: FromQuery = None,
    end: ToQuery = None,
    step: SeriesStep = SeriesStep.hour,
    limit: Annotated[int, _SERIES_LIMIT] = 1000,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    """Points at each step's start from the step holding ``from`` (default: the first
    change) to the one holding ``to`` (inclusive; default: the latest change)."""
    check_window(start, end)
    what = f"a series at step={step.value}"
    check_span(start, end, step.value, what=what)
    store = request.app.state.store
    with store.reading() as conn:
        # the scope first: another workspace's quota and an absent one, one same statement
        if not quota_in_scope(conn, quota, principal.scope) or quota not in quota_names(conn):
            raise NotFound(f"no quota {quota!r}")
        points = series_points(conn, step.value, start, end)  # Invalid: narrow the window
        if points:  # a side left out is the data's edge: the window as resolved
            check_span(points[0], points[-1], step.value, what=what)
        rows = usage_series(conn, points, step.value, quota=quota)
    items, following = page_of([series_row(r) for r in rows], limit, cursor)
    return listing(request, items, following, name="quota-series", fmt=fmt)


@router.get(
    "/queues/{quota}",
    response_model=QueuePage,
    response_model_exclude_unset=True,
    summary="A quota's pending jobs (an inner quota: its subtree's) in dispatch order",
)
def get_queue(
    request: Request,
    principal: CurrentPrincipal,
    quota: str,
    at: AtQuery = None,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    """Position in the quota and in the whole tree, priority (effective, if aged), time
    waited, reason, request, estimated start. ``at``: the queue as it stood then (the jobs
    pending and admitted at that instant)."""
    try:
        page = queue_page(
            request.app.state.store,
            quota,
            at=at,
            limit=limit,
            cursor=cursor,
            workspaces=principal.scope,
        )
    except NotFound:  # the known quotas are not the caller's to list
        raise NotFound(f"no quota {quota!r}") from None
    return listing(request, page.rows, page.next_cursor, name="queue", fmt=fmt, now=page.now)
