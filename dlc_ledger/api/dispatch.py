"""``/v1/jobs/{uid}/why``, ``/v1/waits``, ``/v1/preemptions`` and ``/v1/goodput``: what
the dispatcher decided and what it cost, as ``jobs why`` and ``report waits |
preemptions | goodput`` read them.

Scoping, inside each read's SQL: ``why`` finds only a job of the token's workspaces
(404 otherwise); waits and goodput by quota keep the rows of the token's quota subtree,
goodput by workspace those of its workspaces; preemptions keep the victims in the
subtree and do not name a preemptor outside it (:mod:`projections.dispatch.reports`).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from fastapi import APIRouter, Request, Response

from dlc_ledger.api.auth import CurrentPrincipal
from dlc_ledger.api.csv_responses import CSV_RESPONSES, FormatQuery
from dlc_ledger.api.freshness import with_freshness
from dlc_ledger.api.listing import (
    AtQuery,
    CursorQuery,
    FromQuery,
    LimitQuery,
    ToQuery,
    check_window,
    listed_report,
    plain,
)
from dlc_ledger.api.models_dispatch import GoodputPage, PreemptionPage, WaitsPage, Why
from dlc_ledger.api.problems import PROBLEM_RESPONSES
from dlc_ledger.api.windows import check_span
from dlc_ledger.presenters import money_fields
from dlc_ledger.services.access import Principal
from dlc_ledger.services.dispatch import why_job
from ledger.store.base import Connection
from projections.billing import currency_scales
from projections.dispatch import DecisionWindow, goodput_report, preemptions_report, waits_report

__all__ = ["GoodputKey", "router"]

router = APIRouter(prefix="/v1", tags=["dispatch"], responses=PROBLEM_RESPONSES)


class GoodputKey(StrEnum):
    quota = "quota"
    workspace = "workspace"


def _window(principal: Principal, start: datetime | None, end: datetime | None) -> DecisionWindow:
    check_window(start, end)
    check_span(start, end, None, what="a report's window")
    scope = principal.scope
    return DecisionWindow(start, end, None if scope is None else tuple(sorted(scope)))


@router.get(
    "/jobs/{uid}/why",
    response_model=Why,
    response_model_exclude_unset=True,
    summary="Why a job is pending, was preempted, or runs",
)
def get_why(
    request: Request, principal: CurrentPrincipal, uid: str, at: AtQuery = None
) -> dict[str, Any]:
    """The ``jobs why --format json`` document: pending (reason, positions, the quota
    figures that block it, estimated start), preempted (by whom, which rule, work lost
    and its cost), running or finished (its admission). ``at``: as the job and its queue stood
    then."""
    store = request.app.state.store
    doc = why_job(store, uid, at=at, workspaces=principal.scope)
    with store.reading() as conn:
        scale_of = currency_scales(conn)
    doc["preemptions"] = [
        money_fields(p, scale_of) if p.get("currency") else p for p in doc["preemptions"]
    ]
    out: dict[str, Any] = plain(doc)
    return with_freshness(request, out)


@router.get(
    "/waits",
    response_model=WaitsPage,
    response_model_exclude_unset=True,
    responses=CSV_RESPONSES,
    summary="Waits from queued to admitted: count, p50/p95/max/mean by quota and priority",
)
def get_waits(
    request: Request,
    principal: CurrentPrincipal,
    start: FromQuery = None,
    end: ToQuery = None,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    """Waits that ended (were admitted) in [from, to); ``waiting``: jobs still queued."""
    window = _window(principal, start, end)
    return listed_report(
        request,
        lambda conn: waits_report(conn, window),
        name="waits",
        limit=limit,
        cursor=cursor,
        fmt=fmt,
    )


@router.get(
    "/preemptions",
    response_model=PreemptionPage,
    response_model_exclude_unset=True,
    responses=CSV_RESPONSES,
    summary="Preemptions decided in a window: preemptor, victim, reason, work lost",
)
def get_preemptions(
    request: Request,
    principal: CurrentPrincipal,
    start: FromQuery = None,
    end: ToQuery = None,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    """One row per victim; the GPU-hours it lost (its pods open at the decision, to their
    ends; the figures ``/v1/jobs/{uid}/why`` shows), and their cost at its rate
    (``lost_cost_minor`` + currency + scale + ``lost_cost_display``)."""
    window = _window(principal, start, end)

    def read(conn: Connection) -> list[dict[str, Any]]:
        scale_of = currency_scales(conn)
        return [money_fields(r, scale_of) for r in preemptions_report(conn, window)]

    return listed_report(request, read, name="preemptions", limit=limit, cursor=cursor, fmt=fmt)


@router.get(
    "/goodput",
    response_model=GoodputPage,
    response_model_exclude_unset=True,
    responses=CSV_RESPONSES,
    summary="Share of occupied time that ended in success, by quota or workspace",
)
def get_goodput(
    request: Request,
    principal: CurrentPrincipal,
    by: GoodputKey = GoodputKey.quota,
    start: FromQuery = None,
    end: ToQuery = None,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    """Of the occupancies that ended in [from, to): GPU-weighted (``goodput``) and plain
    (``time_goodput``) shares of occupied time whose pod completed."""
    window = _window(principal, start, end)
    return listed_report(
        request,
        lambda conn: goodput_report(conn, by.value, window),
        name="goodput",
        limit=limit,
        cursor=cursor,
        fmt=fmt,
    )
