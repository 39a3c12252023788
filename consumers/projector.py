"""The projector runner: tails the store and keeps projections current, exactly once.

One transaction per step: lock the checkpoint rows, read the next window of
positions once, apply it to every projection that stands at that position, save
their new positions, commit. Crash anywhere and the window is applied again from
the old checkpoints, never twice. Projections that stand at different positions
(one was rebuilt, one is new) are advanced separately until they meet, then read
together: reading and decoding events costs more than most projections' writes,
so a page is read once, not once per projection.

Windows are ranges of positions ending at or below the visible head. The store
assigns dense positions in commit order (``docs/store.md``), so such a window is
complete when read, and a projection's event-type filter can go into the query
without losing track of how far it got.

Tailing waits on PostgreSQL ``LISTEN dlc_events`` (the store notifies after each
append) with a polling fallback, so an idle runner costs nothing and a busy one
never sleeps.
"""

from __future__ import annotations

import select as io_select
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg
from sqlalchemy import text

from ledger.store.postgres import PostgresEventStore
from projections.base import Projection

__all__ = ["ProjectionStatus", "Projector", "checkpoint_name"]


def checkpoint_name(projection: Projection) -> str:
    return f"projection:{projection.name}"


@dataclass(frozen=True, slots=True)
class ProjectionStatus:
    name: str
    position: int
    head: int

    @property
    def lag(self) -> int:
        return self.head - self.position


class Projector:
    def __init__(
        self,
        store: PostgresEventStore,
        projections: Sequence[Projection],
        *,
        page_size: int = 2000,
    ) -> None:
        names = [p.name for p in projections]
        if len(set(names)) != len(names) or not all(names):
            raise ValueError(f"projection names must be unique and non-empty: {names}")
        self.store = store
        self.projections = list(projections)
        self.page_size = page_size

    def step(self, projection: Projection) -> int:
        """Advance ``projection`` alone by at most one page; returns positions covered."""
        return self._advance([projection])

    def catch_up(self, *, until: int | None = None) -> int:
        """Run every projection up to the store's head (or ``until``); returns positions covered."""
        total = 0
        while covered := self._advance(self.projections, until=until):
            total += covered
        return total

    def _advance(self, candidates: Sequence[Projection], *, until: int | None = None) -> int:
        """One step for the candidates furthest behind, in one transaction."""
        with self.store.transaction() as uow:
            conn = uow.connection
            names = sorted(checkpoint_name(p) for p in candidates)
            conn.execute(
                text(
                    "INSERT INTO checkpoints (name, position, offsets, updated_at) "
                    "SELECT n, 0, '{}'::jsonb, now() FROM unnest(CAST(:names AS text[])) n "
                    "ON CONFLICT (name) DO NOTHING"
                ),
                {"names": names},
            )
            # sorted FOR UPDATE: two runners never deadlock, and never both apply a page
            locked: dict[str, int] = dict(
                conn.execute(
                    text(
                        "SELECT name, position FROM checkpoints "
                        "WHERE name = ANY(CAST(:names AS text[])) ORDER BY name FOR UPDATE"
                    ),
                    {"names": names},
                ).all()
            )
            head = self.store.head_position_on(conn)  # read after the locks: see module doc
            if until is not None:
                head = min(head, until)
            positions = {p.name: int(locked[checkpoint_name(p)]) for p in candidates}
            low = min(positions.values())
            if low >= head:
                return 0
            group = [p for p in candidates if positions[p.name] == low]
            ahead = [pos for pos in positions.values() if pos > low]
            upto = min([low + self.page_size, head, *ahead])
            wanted: set[str] | None = set()
            for projection in group:
                if not projection.event_types:
                    wanted = None
                    break
                assert wanted is not None
                wanted |= projection.event_types
            page = self.store.read_window_on(
                conn, low, upto, None if wanted is None else sorted(wanted)
            )
            for projection in group:
                types = projection.event_types
                relevant = [r for r in page if r.envelope.type in types] if types else page
                if relevant:
                    projection.apply(conn, relevant)
                uow.save_checkpoint(checkpoint_name(projection), position=upto)
            return upto - low

    def position(self, projection: Projection) -> int:
        with self.store.transaction() as uow:
            return uow.load_checkpoint(checkpoint_name(projection)).position

    def status(self) -> list[ProjectionStatus]:
        head = self.store.head_position()
        return [ProjectionStatus(p.name, self.position(p), head) for p in self.projections]

    def rebuild(self, projection: Projection) -> int:
        """Empty the projection and replay the whole store into it."""
        with self.store.transaction() as uow:
            uow.load_checkpoint(checkpoint_name(projection), for_update=True)
            projection.reset(uow.connection)
            uow.save_checkpoint(checkpoint_name(projection), position=0)
        read = 0
        while step := self.step(projection):
            read += step
        return read

    def run_forever(self, stop: threading.Event, *, poll_interval: float = 2.0) -> None:
        """Tail live: catch up, then wait for a NOTIFY (or the poll interval), repeat."""
        url = self.store.engine.url.set(drivername="postgresql").render_as_string(
            hide_password=False
        )
        with psycopg.connect(url, autocommit=True) as listener:
            listener.execute("LISTEN dlc_events")
            while not stop.is_set():
                if self.catch_up() == 0:
                    io_select.select([listener.fileno()], [], [], poll_interval)
                    for _ in listener.notifies(timeout=0):
                        pass
