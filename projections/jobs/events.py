"""Stored events for a reader with a scope: one by id, one stream a page at a time.

A workspace-scoped reader (an API token with only ``workspace:<id>`` roles) sees the
streams of its workspaces' jobs (``job/<uid>`` of a job whose workspace is in scope) and
their budgets (``budget/<workspace>``); the condition is in the WHERE, so an event
outside the scope reads as absent. Other streams (quotas, nodes) are shared by several
workspaces and stay with the global roles until the quota subtree scoping exists.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from sqlalchemy import ColumnElement, Connection, and_, exists, or_, select

from ledger.canonical import format_timestamp
from ledger.store.schema import events
from projections.jobs import job_state

__all__ = ["EventPage", "event_by_id", "stream_events"]


@dataclass(frozen=True)
class EventPage:
    events: list[dict[str, Any]]
    next_after: int | None  # the version to pass as ``after`` for the next page


def _in_scope(workspaces: Collection[str] | None) -> ColumnElement[bool] | None:
    if workspaces is None:
        return None
    scope = sorted(workspaces)
    own_job = exists(
        select(job_state.c.job_uid).where(
            events.c.stream == "job/" + job_state.c.job_uid, job_state.c.workspace.in_(scope)
        )
    )
    return or_(own_job, events.c.stream.in_([f"budget/{w}" for w in scope]))


def _event(row: Any) -> dict[str, Any]:
    return {
        "position": row.position,
        "event_id": str(row.event_id),
        "stream": row.stream,
        "version": row.version,
        "type": row.type,
        "schema_version": row.schema_version,
        "occurred_at": format_timestamp(row.occurred_at),
        "observed_at": format_timestamp(row.observed_at),
        "recorded_at": format_timestamp(row.recorded_at),
        "source": row.source,
        "causation_id": str(row.causation_id) if row.causation_id else None,
        "correlation_id": str(row.correlation_id) if row.correlation_id else None,
        "data": row.data,
        "hash": row.hash.hex(),
    }


def event_by_id(
    conn: Connection, event_id: UUID, *, workspaces: Collection[str] | None = None
) -> dict[str, Any] | None:
    query = events.select().where(events.c.event_id == event_id)
    scope = _in_scope(workspaces)
    if scope is not None:
        query = query.where(scope)
    row = conn.execute(query).first()
    return None if row is None else _event(row)


def stream_events(
    conn: Connection,
    stream: str,
    *,
    after: int = 0,
    limit: int = 100,
    workspaces: Collection[str] | None = None,
) -> EventPage:
    """Events of ``stream`` with version > ``after``, in version order, one page."""
    query = events.select().where(and_(events.c.stream == stream, events.c.version > after))
    scope = _in_scope(workspaces)
    if scope is not None:
        query = query.where(scope)
    rows = conn.execute(query.order_by(events.c.version).limit(limit + 1)).all()
    page = [_event(row) for row in rows[:limit]]
    return EventPage(page, page[-1]["version"] if len(rows) > limit else None)
