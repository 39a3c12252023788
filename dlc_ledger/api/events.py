"""``/v1/events/{id}`` and ``/v1/streams/{stream}/events``: the stored facts, as recorded.

Workspace-scoped tokens read only their workspaces' streams (scope in the SQL, see
:mod:`projections.jobs.events`); anything else reads as 404 / an empty page.
"""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Query, Request, Response

from dlc_ledger.api.auth import CurrentPrincipal
from dlc_ledger.api.csv_responses import CSV_RESPONSES, FormatQuery
from dlc_ledger.api.listing import listing
from dlc_ledger.api.models import Event, EventPage
from dlc_ledger.api.problems import PROBLEM_RESPONSES
from dlc_ledger.services.errors import NotFound
from projections.jobs import event_by_id, stream_events

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["events"], responses=PROBLEM_RESPONSES)
_MAX_VERSION = 2**31 - 1


@router.get("/events/{event_id}", response_model=Event, summary="One stored event by its id")
def get_event(request: Request, principal: CurrentPrincipal, event_id: UUID) -> Event:
    with request.app.state.store.reading() as conn:
        found = event_by_id(conn, event_id, workspaces=principal.scope)
    if found is None:
        raise NotFound(f"no event with id {event_id}")
    return Event.model_validate(found)


@router.get(
    "/streams/{stream:path}/events",
    response_model=EventPage,
    responses=CSV_RESPONSES,
    summary="A stream's events in version order, a page at a time",
)
def get_stream_events(
    request: Request,
    principal: CurrentPrincipal,
    stream: str,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[
        str | None, Query(pattern=r"^[0-9]+$", description="next_cursor of the previous page.")
    ] = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    # a cursor past the largest version a stream can hold (a 32-bit column) is simply past
    # its end: an empty page, not an out-of-range error from the database
    after = min(int(cursor), _MAX_VERSION) if cursor else 0
    with request.app.state.store.reading() as conn:
        page = stream_events(
            conn,
            stream,
            after=after,
            limit=limit,
            workspaces=principal.scope,
        )
    following = None if page.next_after is None else str(page.next_after)
    return listing(request, page.events, following, name="stream-events", fmt=fmt)
