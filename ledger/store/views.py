"""Named read views over the stored events, for the reads that aggregate facts in SQL.

Most reads go through the read models; a few aggregate decisions or clocks over the events
themselves (waits and preemptions from the dispatcher's decision events, the part of the
cluster's observed clock its read model has not folded yet). They read through these
views, never the ``events`` table by name, so the table's layout stays the store
adapter's own (as the eventsourcing library's projections read through a recorder's
named views). Each view is a derived table of
``(position, occurred_at, recorded_at, event_id, stream, source, data)``.
"""

from __future__ import annotations

import re

from ledger.errors import Invalid

__all__ = ["job_time_span_sql", "latest_cluster_time_sql", "typed_events"]

_TYPE = re.compile(r"[A-Z][A-Za-z]*")
_COLUMNS = "position, occurred_at, recorded_at, event_id, stream, source, data"


def typed_events(*types: str) -> str:
    """The events of ``types`` (catalogue names), as a parenthesised derived table for a
    ``FROM`` clause: ``FROM {typed_events('JobSubmitted')} e``."""
    if not types:
        raise Invalid("a view names at least one event type")
    for name in types:
        if not _TYPE.fullmatch(name):  # names are interpolated: catalogue identifiers only
            raise Invalid(f"not an event type name: {name!r}")
    names = ", ".join(f"'{name}'" for name in types)
    return f"(SELECT {_COLUMNS} FROM events WHERE type IN ({names}))"


def latest_cluster_time_sql() -> str:
    """One row, one column: the latest ``occurred_at`` of a cluster fact (a job's or a
    node's stream) stored after position ``:after``, NULL when none is.

    A range of the primary key: the read model ``extent_sources`` holds the clock up to
    its checkpoint, and this reads the events it has still to fold (``:after`` = 0: every
    event, a scan)."""
    return (
        "SELECT max(occurred_at) FROM events WHERE position > :after "
        "AND (stream LIKE 'job/%' OR stream LIKE 'node/%')"
    )


def job_time_span_sql() -> str:
    """One row, one column: cluster seconds from the first to the last job fact stored."""
    return (
        "SELECT EXTRACT(EPOCH FROM max(occurred_at) - min(occurred_at)) FROM events "
        "WHERE stream LIKE 'job/%'"
    )
