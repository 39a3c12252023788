"""Per event source: the earliest cluster fact it wrote and the latest instant of its
events in a job's or a node's stream.

The store's span (``/v1/extent``) and its cluster clock (the billing runs' "now") were a
scan of every event: ``min(occurred_at)`` of the cluster facts, ``max(occurred_at)`` of
the job and node streams, the distinct watcher sources; at 10 M events seconds per call.
Both are minima and maxima, so they fold per page in any order (a watcher delivers out of
order, a re-list repeats) into one row per source, and the reads take the minimum and
maximum of those few rows (:mod:`projections.extent.reads`). Sources are few: a
watcher's ``kube-watcher/<cluster>``, a replay's, the product's own writers.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Column, Connection, DateTime, Table, Text, func
from sqlalchemy.dialects.postgresql import insert as pg_insert

from ledger.events import CLUSTER_FACT_TYPES
from ledger.store.base import RecordedEvent, UnitOfWork
from ledger.store.schema import metadata
from projections.base import Projection

__all__ = ["CLOCK_STREAMS", "ExtentProjection", "extent_sources"]

#: The streams whose events set the cluster clock: a job's and a node's.
CLOCK_STREAMS = ("job/", "node/")

extent_sources = Table(
    "extent_sources",
    metadata,
    Column("source", Text, primary_key=True),
    # the earliest occurred_at of a cluster fact (CLUSTER_FACT_TYPES) it wrote; NULL: none
    Column("first_at", DateTime(timezone=True)),
    # the latest occurred_at of its events in a job's or node's stream; NULL: none
    Column("last_at", DateTime(timezone=True)),
)


class ExtentProjection(Projection):
    name = "extent"
    # folding is a comparison or two per event; the reading is the lane's (docs/projections.md)
    cost = 0.05
    tables = (extent_sources,)
    # every type: the clock counts every event of a job's or node's stream, whatever its
    # type (only watchers write those streams, and only cluster facts, but the clock's
    # meaning is the stream's, as it was when it was a scan)
    event_types: frozenset[str] = frozenset()

    def apply(self, uow: UnitOfWork, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        firsts: dict[str, datetime] = {}
        lasts: dict[str, datetime] = {}
        facts = CLUSTER_FACT_TYPES
        for event in events:
            at = event.occurred_at
            source = event.source
            if event.type in facts:
                first = firsts.get(source)
                if first is None or at < first:
                    firsts[source] = at
            if event.stream.startswith(CLOCK_STREAMS):
                last = lasts.get(source)
                if last is None or at > last:
                    lasts[source] = at
        sources = sorted(firsts.keys() | lasts.keys())
        if not sources:
            return
        insert = pg_insert(extent_sources).values(
            [{"source": s, "first_at": firsts.get(s), "last_at": lasts.get(s)} for s in sources]
        )
        # LEAST and GREATEST skip NULLs: a page without a source's facts keeps its bound
        conn.execute(
            insert.on_conflict_do_update(
                index_elements=["source"],
                set_={
                    "first_at": func.least(extent_sources.c.first_at, insert.excluded.first_at),
                    "last_at": func.greatest(extent_sources.c.last_at, insert.excluded.last_at),
                },
            )
        )
