"""What a replay did and found: its summary, and the store checked against the trace.

The trace says how many occupancies must start (one per scheduled pod) and end (one per
deleted scheduled pod); the store says how many the watcher's events recorded. A replay is
``ok`` when the store has at least as many as the trace.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import func, select

from dlc_ledger.wiring.replay.closed_loop import ClosedLoopFigures
from kubesim.traces import Trace
from ledger.events import WATCHER_SOURCE_PREFIX
from ledger.store.postgres import PostgresEventStore
from ledger.store.schema import dead_letters
from ledger.store.schema import events as events_table

__all__ = ["ReplaySummary", "StoreCounts", "check_store"]


@dataclass
class ReplaySummary:
    """What a replay did and found; ``ok`` when the store matches the trace."""

    trace: str
    cluster: str
    topic: str
    instances: int
    nodes: int
    expected_started: int
    expected_ended: int
    occupancies_started: int = 0
    occupancies_ended: int = 0
    events_stored: int = 0  # added by this run
    events_total: int = 0
    published: int = 0
    ingested: int = 0
    dead_letters: int = 0
    projected: bool = False
    wall_seconds: float = 0.0
    virtual_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    closed_loop: ClosedLoopFigures | None = None
    #: a closed loop stopped before its jobs ended (``--until``): the trace's counts of
    #: started and ended pods do not apply
    stopped: bool = False

    @staticmethod
    def expected(trace: Trace, cluster: str, topic: str) -> ReplaySummary:
        """A summary with what ``trace`` must leave in the store, nothing found yet."""
        scheduled = [i for i in trace.instances if i.scheduled is not None]
        return ReplaySummary(
            trace=trace.name,
            cluster=cluster,
            topic=topic,
            instances=len(trace.instances),
            nodes=len(trace.nodes),
            expected_started=len(scheduled),
            expected_ended=sum(1 for i in scheduled if i.deleted is not None),
        )

    @property
    def ok(self) -> bool:
        return self.stopped or (
            self.occupancies_started >= self.expected_started
            and self.occupancies_ended >= self.expected_ended
        )

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}

    def lines(self) -> list[str]:
        return [
            f"replay {self.trace}: {self.instances} jobs on {self.nodes} nodes,"
            f" {self.virtual_seconds:,.0f} virtual s in {self.wall_seconds:.1f} s wall",
            f"events stored: {self.events_stored} new ({self.events_total} in the store),"
            f" {self.published} published, {self.ingested} ingested",
            f"occupancies: {self.occupancies_started} started, {self.occupancies_ended} ended"
            + (
                " (stopped before the jobs ended)"
                if self.stopped
                else f" (trace: {self.expected_started} started, {self.expected_ended} ended)"
            ),
            f"dead letters: {self.dead_letters}",
            *(self.closed_loop.lines() if self.closed_loop else []),
            *self.notes,
        ]


def _count(store: PostgresEventStore, query: Any) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(query).scalar() or 0)


@dataclass(frozen=True)
class StoreCounts:
    """Events and dead letters in the store, read before a replay to tell what it added."""

    events: int
    dead_letters: int

    @staticmethod
    def read(store: PostgresEventStore) -> StoreCounts:
        return StoreCounts(
            events=_count(store, select(func.count()).select_from(events_table)),
            dead_letters=_count(store, select(func.count()).select_from(dead_letters)),
        )


def check_store(summary: ReplaySummary, store: PostgresEventStore, before: StoreCounts) -> None:
    """Fill ``summary`` with what the store holds from this replay's cluster."""
    source = f"{WATCHER_SOURCE_PREFIX}{summary.cluster}"
    with store.engine.connect() as conn:
        counts: dict[str, int] = dict(
            conn.execute(
                select(events_table.c.type, func.count())
                .where(
                    events_table.c.source == source,
                    events_table.c.type.in_(["OccupancyStarted", "OccupancyEnded"]),
                )
                .group_by(events_table.c.type)
            ).all()
        )
    summary.occupancies_started = int(counts.get("OccupancyStarted", 0))
    summary.occupancies_ended = int(counts.get("OccupancyEnded", 0))
    after = StoreCounts.read(store)
    summary.events_total = after.events
    summary.events_stored = after.events - before.events
    summary.dead_letters = after.dead_letters - before.dead_letters
