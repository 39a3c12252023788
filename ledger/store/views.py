"""Named read views over the stored events, for the reads that aggregate facts in SQL.

Most reads go through the read models; a few aggregate decisions or clocks over the events
themselves (waits and preemptions from the dispatcher's decision events, the cluster's
observed clock). They read through these views, never the ``events`` table by name, so
the table's layout stays the store adapter's own (as the eventsourcing library's
projections read through a recorder's named views). Each view is a derived table of
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
    node's stream), NULL when none is stored."""
    return "SELECT max(occurred_at) FROM events WHERE stream LIKE 'job/%' OR stream LIKE 'node/%'"


def job_time_span_sql() -> str:
    """One row, one column: cluster seconds from the first to the last job fact stored."""
    return (
        "SELECT EXTRACT(EPOCH FROM max(occurred_at) - min(occurred_at)) FROM events "
        "WHERE stream LIKE 'job/%'"
    )
