"""``/v1/cost/top``, ``/v1/month-to-date`` and ``/v1/budgets``: what a finance person
or a team lead reads at a glance (issue 36).

- the top list is ordered and cut in SQL (:mod:`projections.billing.top`), with the
  window's total rounded once: it equals ``report cost``'s to the minor unit;
- month to date: each workspace's posted cost of the month so far, its forecast to the
  month's end and its budget (:mod:`dlc_ledger.presenters.months`);
- budgets: ``budgets show`` with the crossings stored (:mod:`dlc_ledger.presenters.budgets`).

A workspace token's workspaces go into each read's SQL, as on ``/v1/cost``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from dlc_ledger.api.auth import CurrentPrincipal
from dlc_ledger.api.csv_responses import CSV_RESPONSES, FormatQuery
from dlc_ledger.api.listing import AtQuery, CursorQuery, LimitQuery, listed_report, listing
from dlc_ledger.api.models_finance import BudgetPage, CostTopPage, MonthToDatePage
from dlc_ledger.api.problems import PROBLEM_RESPONSES
from dlc_ledger.api.reports import (
    AsOfQuery,
    CostSource,
    WindowFromQuery,
    WindowToQuery,
    report_window,
)
from dlc_ledger.presenters import budget_rows, money_fields, month_to_date, top_cost
from dlc_ledger.services.budgets import default_instant
from dlc_ledger.services.clocks import projected_cluster_time
from dlc_ledger.services.subscriptions import prepaid
from ledger.budgets import period_of
from ledger.store.base import Connection
from projections.billing import ScaleOf, currency_scales

__all__ = ["TopBy", "router"]

router = APIRouter(prefix="/v1", tags=["finance"], responses={**PROBLEM_RESPONSES, **CSV_RESPONSES})


class TopBy(StrEnum):
    job = "job"
    user = "user"
    quota = "quota"
    workspace = "workspace"


_WITH_PREPAID = Query(
    description="Add prepaid_minor: the workspace's subscribed capacity's cost this month "
    "so far (recognised revenue attributed by guarantee, docs/subscriptions.md)."
)
_N = Query(ge=1, le=500, description="How many groups (1 to 500).")
#: a table a dashboard reads whole: one page by default
_WHOLE = 1000


@router.get(
    "/cost/top",
    response_model=CostTopPage,
    response_model_exclude_unset=True,
    summary="The n costliest jobs, users, quotas or workspaces, and the window's total",
)
def get_cost_top(
    request: Request,
    principal: CurrentPrincipal,
    by: TopBy = TopBy.job,
    n: Annotated[int, _N] = 20,
    start: WindowFromQuery = None,
    end: WindowToQuery = None,
    as_of: AsOfQuery = None,
    source: CostSource = CostSource.auto,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    """Ordered by cost, descending (ties by key), as ``report cost --group-by <by>`` costs
    the window; ``count`` the groups in the window, ``total`` its whole cost rounded once
    (``report cost``'s total to the minor unit). One page: ``next_cursor`` is null."""
    window = report_window(principal, start, end, as_of)
    with request.app.state.store.reading() as conn:
        top = top_cost(conn, by.value, window, n, source=source.value)
        scale_of = currency_scales(conn)
    return listing(
        request,
        [money_fields(row, scale_of) for row in top.rows],
        None,
        name="cost-top",
        fmt=fmt,
        count=top.groups,
        total=money_fields(top.total, scale_of),
        window={"from": start, "to": end},
    )


def _with_budget(row: dict[str, Any], scale_of: ScaleOf) -> dict[str, Any]:
    out = money_fields(row, scale_of)
    if row["budget"] is not None:
        out["budget"] = money_fields(row["budget"], scale_of)
    return out


@router.get(
    "/month-to-date",
    response_model=MonthToDatePage,
    response_model_exclude_unset=True,
    summary="Per workspace: cost this month so far, forecast to its end, budget",
)
def get_month_to_date(
    request: Request,
    principal: CurrentPrincipal,
    at: AtQuery = None,
    with_prepaid: Annotated[bool, _WITH_PREPAID] = False,
    limit: LimitQuery = _WHOLE,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    """``at`` (cluster time) defaults to the latest instant with data (``/v1/extent``'s
    ``last``); forecast: cost x month length / time elapsed (docs/api.md);
    ``with_prepaid``: each workspace's prepaid cost of the month so far beside it."""
    store = request.app.state.store
    when = at or projected_cluster_time(store)  # a one-row read
    if when is None:  # nothing stored yet: no month to show
        return listing(request, [], None, name="month-to-date", fmt=fmt, at=None)
    scope = principal.scope
    shares = None
    if with_prepaid:
        month = period_of("month", when)
        shares = prepaid(store, ("workspace",), month.start, when, workspaces=scope)

    def read(conn: Connection) -> list[dict[str, Any]]:
        scale_of = currency_scales(conn)
        rows = month_to_date(conn, when, workspaces=scope, prepaid=shares)
        return [_with_budget(r, scale_of) for r in rows]

    return listed_report(
        request, read, name="month-to-date", limit=limit, cursor=cursor, fmt=fmt, at=when
    )


@router.get(
    "/budgets",
    response_model=BudgetPage,
    response_model_exclude_unset=True,
    summary="Budgets in force with what was spent, their state and crossings",
)
def get_budgets(
    request: Request,
    principal: CurrentPrincipal,
    at: AtQuery = None,
    limit: LimitQuery = _WHOLE,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    """``budgets show`` (``at`` as its ``--at``: default now, or a replay's cluster
    clock), each budget with ``thresholds_crossed``, the crossings stored for its period."""
    when = at or default_instant(request.app.state.store)
    scope = principal.scope

    def read(conn: Connection) -> list[dict[str, Any]]:
        scale_of = currency_scales(conn)
        rows = budget_rows(conn, when, workspaces=scope)
        for row in rows:
            row["thresholds_crossed"] = [
                money_fields(c, scale_of) for c in row["thresholds_crossed"]
            ]
        return [money_fields(row, scale_of) for row in rows]

    return listed_report(
        request, read, name="budgets", limit=limit, cursor=cursor, fmt=fmt, at=when
    )
