"""The projector runner: tails the store and keeps projections current, exactly once.

For each projection, one transaction: lock its checkpoint row, read the next page
of events after it, apply the page, save the new position, commit. Crash
anywhere and the page is applied again from the old checkpoint, never twice.
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
        """Apply at most one page to ``projection``; returns how many events were read."""
        with self.store.transaction() as uow:
            name = checkpoint_name(projection)
            checkpoint = uow.load_checkpoint(name, for_update=True)
            if checkpoint.updated_at is None:
                uow.save_checkpoint(name, position=0)  # create the row so it can be locked
                checkpoint = uow.load_checkpoint(name, for_update=True)
            page = self.store.read_after_on(uow.connection, checkpoint.position, self.page_size)
            if not page:
                return 0
            wanted = projection.event_types
            relevant = [r for r in page if r.envelope.type in wanted] if wanted else page
            if relevant:
                projection.apply(uow.connection, relevant)
            uow.save_checkpoint(name, position=page[-1].position)
            return len(page)

    def catch_up(self, *, until: int | None = None) -> int:
        """Run every projection up to the store's head (or ``until``); returns events read."""
        total = 0
        target = self.store.head_position() if until is None else until
        for projection in self.projections:
            while self.position(projection) < target:
                read = self.step(projection)
                if read == 0:
                    break
                total += read
        return total

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
