"""Stored events for a reader with a scope: one by id, one stream a page at a time.

A workspace-scoped reader (an API token with only ``workspace:<id>`` roles) sees the
streams of its workspaces' jobs (``job/<uid>`` of a job whose workspace is in scope) and
their budgets (``budget/<workspace>``); the condition is in the WHERE, so an event
outside the scope reads as absent. Other streams (quotas, nodes) are shared by several
workspaces and stay with the global roles until the quota subtree scoping exists.

Absent in time too (issue 37): a stream's scope is decided on its name before any of its
events is read, an event's by one primary-key probe of ``job_state``, so another
workspace's stream costs what an unknown one does however many events it holds
(tests/dlc_ledger/api/test_timing.py).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from sqlalchemy import ColumnElement, Connection, and_, func, literal, or_, select

from ledger.canonical import format_timestamp
from ledger.store.schema import events
from projections.jobs.tables import job_state

__all__ = ["EventPage", "event_by_id", "stream_events"]


@dataclass(frozen=True)
class EventPage:
    events: list[dict[str, Any]]
    next_after: int | None  # the version to pass as ``after`` for the next page


def _own_job(uid: ColumnElement[str], scope: list[str]) -> ColumnElement[bool]:
    # the job's workspace by job_state's primary key, one index probe however many jobs
    # there are; a scalar subquery and not an EXISTS, which the planner may turn into a
    # hash of every job of the scope
    workspace = select(job_state.c.workspace).where(job_state.c.job_uid == uid)
    return workspace.scalar_subquery().in_(scope)


def _event_in_scope(workspaces: Collection[str] | None) -> ColumnElement[bool] | None:
    """The scope of the event row being read: its stream is known only from the row."""
    if workspaces is None:
        return None
    scope = sorted(workspaces)
    job = and_(events.c.stream.startswith("job/"), _own_job(func.substr(events.c.stream, 5), scope))
    return or_(job, events.c.stream.in_([f"budget/{w}" for w in scope]))


def _stream_in_scope(stream: str, workspaces: Collection[str] | None) -> ColumnElement[bool] | None:
    """The scope of ``stream`` itself, on the parameter and not on the event rows: the
    database decides it once, before it reads any event (a one-time filter), so a stream
    outside the scope costs one probe of ``job_state`` whether or not it holds events."""
    if workspaces is None:
        return None
    scope = sorted(workspaces)
    kind, _, key = stream.partition("/")
    # the parameters are compared in SQL, not here: one statement whatever the stream
    job = and_(literal(kind) == "job", _own_job(literal(key), scope))
    return or_(job, literal(stream).in_([f"budget/{w}" for w in scope]))


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
    scope = _event_in_scope(workspaces)
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
    scope = _stream_in_scope(stream, workspaces)
    if scope is not None:
        query = query.where(scope)
    rows = conn.execute(query.order_by(events.c.version).limit(limit + 1)).all()
    page = [_event(row) for row in rows[:limit]]
    return EventPage(page, page[-1]["version"] if len(rows) > limit else None)
