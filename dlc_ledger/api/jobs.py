"""``/v1/jobs``: the jobs read model, as ``dlc-ledger jobs list|show`` reads it; a job's
timeline also as a list of its own (``/v1/jobs/{uid}/timeline``, JSON or CSV: the
dashboard's job page downloads it).

A workspace-scoped token passes its workspaces into the query (``list_jobs`` /
``find_job``), so a job outside them is neither listed nor found (404, not 403: its
existence is not disclosed).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from dlc_ledger.api.auth import CurrentPrincipal
from dlc_ledger.api.csv_responses import CSV_RESPONSES, FormatQuery
from dlc_ledger.api.freshness import with_freshness
from dlc_ledger.api.listing import CursorQuery, Instant, LimitQuery, listing, page_of
from dlc_ledger.api.models import JobDetail, JobPage, TimelinePage
from dlc_ledger.api.problems import PROBLEM_RESPONSES
from dlc_ledger.presenters import listed_jobs, money_fields
from projections.billing import currency_scales
from projections.jobs import find_job, job_detail, timeline_entries

__all__ = ["router"]

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], responses=PROBLEM_RESPONSES)


@router.get(
    "",
    response_model=JobPage,
    response_model_exclude_unset=True,
    responses=CSV_RESPONSES,
    summary="Jobs, newest submission first, a page",
)
def get_jobs(
    request: Request,
    principal: CurrentPrincipal,
    workspace: str | None = None,
    status: str | None = None,
    user: str | None = None,
    q: Annotated[
        str | None,
        Query(
            max_length=200,
            description="Jobs whose name holds it, or whose uid starts with it (any case).",
        ),
    ] = None,
    at: Annotated[
        Instant | None, Query(description="Jobs as they were then (ISO 8601, with zone).")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    cursor: str | None = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    """Each job with its GPU request and model, GPU-hours and cost so far (posted to the
    ledger), current whatever ``at`` shows."""
    with request.app.state.store.reading() as conn:
        page = listed_jobs(
            conn,
            workspace=workspace,
            status=status,
            user=user,
            q=q,
            limit=limit,
            at=at,
            cursor=cursor,
            workspaces=principal.scope,
        )
        scale_of = currency_scales(conn)
    items = [money_fields(job, scale_of) for job in page.jobs]
    return listing(request, items, page.next_cursor, name="jobs", fmt=fmt)


@router.get(
    "/{uid}",
    response_model=JobDetail,
    response_model_exclude_unset=True,
    summary="One job: state, occupied resources, cost and its timeline",
)
def get_job(request: Request, principal: CurrentPrincipal, uid: str) -> Response:
    store = request.app.state.store
    with store.snapshot() as uow:
        found = find_job(uow.connection, uid, workspaces=principal.scope)
        detail: dict[str, Any] = job_detail(uow, found, workspaces=principal.scope)
        scale_of = currency_scales(uow.connection)
    detail["cost"] = [money_fields(row, scale_of) for row in detail["cost"]]
    # validated and rendered once (FastAPI would validate the model a second time)
    body = JobDetail.model_validate(with_freshness(request, detail))
    return Response(body.model_dump_json(exclude_unset=True), media_type="application/json")


@router.get(
    "/{uid}/timeline",
    response_model=TimelinePage,
    responses=CSV_RESPONSES,
    summary="One job's timeline, a page: the entries of /v1/jobs/{uid}'s timeline",
)
def get_job_timeline(
    request: Request,
    principal: CurrentPrincipal,
    uid: str,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    """Every event about the job in cluster-time order, each with its summary, source,
    ``by``, ``reason`` and whether it arrived late: the same entries, scoped the same
    way, as the job's ``timeline`` in ``/v1/jobs/{uid}``."""
    with request.app.state.store.snapshot() as uow:
        found = find_job(uow.connection, uid, workspaces=principal.scope)
        entries = timeline_entries(uow, found, workspaces=principal.scope)
    items, following = page_of(entries, limit, cursor)
    return listing(request, items, following, name="job-timeline", fmt=fmt)
