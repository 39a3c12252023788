"""``/v1/services`` and ``/v1/notebooks``: inference services and notebook instances, as
``dlc-ledger services list|show`` and ``notebooks list`` read them (docs/workloads.md).

Scoped as ``/v1/jobs`` is: a workspace-scoped token lists and finds only its workspaces'
workloads (404 for another's, whose existence is not disclosed); a training job is not a
service (404).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from dlc_ledger.api.auth import CurrentPrincipal
from dlc_ledger.api.csv_responses import CSV_RESPONSES, FormatQuery
from dlc_ledger.api.freshness import with_freshness
from dlc_ledger.api.listing import listing
from dlc_ledger.api.models_workloads import WorkloadDetail, WorkloadPage
from dlc_ledger.api.problems import PROBLEM_RESPONSES
from dlc_ledger.presenters import listed_jobs, money_fields
from ledger.canonical import format_timestamp
from projections.billing import currency_scales, replica_billing
from projections.jobs import workload_detail

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["services"], responses=PROBLEM_RESPONSES)


def _page(
    request: Request,
    principal: CurrentPrincipal,
    workload: str,
    workspace: str | None,
    limit: int,
    cursor: str | None,
    fmt: FormatQuery,
) -> dict[str, Any] | Response:
    with request.app.state.store.reading() as conn:
        page = listed_jobs(
            conn,
            workspace=workspace,
            limit=limit,
            cursor=cursor,
            workspaces=principal.scope,
            frameworks=(workload,),
        )
        scale_of = currency_scales(conn)
    items = [money_fields(job, scale_of) for job in page.jobs]
    return listing(request, items, page.next_cursor, name=f"{workload}s", fmt=fmt)


LimitParam = Annotated[int, Query(ge=1, le=1000)]


@router.get(
    "/services",
    response_model=WorkloadPage,
    response_model_exclude_unset=True,
    responses=CSV_RESPONSES,
    summary="Inference services, newest first, a page",
)
def get_services(
    request: Request,
    principal: CurrentPrincipal,
    workspace: str | None = None,
    limit: LimitParam = 50,
    cursor: str | None = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    """Each service as ``/v1/jobs`` shows a job (its ``replicas``: the desired count now,
    with its pods per replica), with its GPU-hours and cost so far."""
    return _page(request, principal, "service", workspace, limit, cursor, fmt)


@router.get(
    "/notebooks",
    response_model=WorkloadPage,
    response_model_exclude_unset=True,
    responses=CSV_RESPONSES,
    summary="Notebook instances, newest first, a page",
)
def get_notebooks(
    request: Request,
    principal: CurrentPrincipal,
    workspace: str | None = None,
    limit: LimitParam = 50,
    cursor: str | None = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    return _page(request, principal, "notebook", workspace, limit, cursor, fmt)


@router.get(
    "/services/{service_uid}",
    response_model=WorkloadDetail,
    response_model_exclude_unset=True,
    summary="One service: replicas over time, occupied resources, cost and its timeline",
)
def get_service(request: Request, principal: CurrentPrincipal, service_uid: str) -> Response:
    """A service (or a notebook) as ``/v1/jobs/{uid}`` shows a job, with its desired
    replicas over time and its occupied pods over time (from its timeline)."""
    store = request.app.state.store
    with store.snapshot() as uow:
        detail = workload_detail(uow, service_uid, workspaces=principal.scope)
        scale_of = currency_scales(uow.connection)
        detail["replicas_billed"] = [
            {
                **r,
                "started_at": format_timestamp(r["started_at"]),
                "ended_at": None if r["ended_at"] is None else format_timestamp(r["ended_at"]),
            }
            for r in replica_billing(uow.connection, detail["job_uid"])
        ]
    detail["cost"] = [money_fields(row, scale_of) for row in detail["cost"]]
    body = WorkloadDetail.model_validate(with_freshness(request, detail))
    return Response(body.model_dump_json(exclude_unset=True), media_type="application/json")
