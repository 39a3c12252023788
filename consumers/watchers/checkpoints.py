"""Where a watcher keeps its resume point in PostgreSQL: resourceVersions and tracker state.

The resourceVersion of each resource type goes to the store's ``checkpoints`` table as
``watch:<cluster>:<resource>`` with ``offsets={"rv": N}``; the tracker's per-object state goes
to ``watcher_objects`` (migration 0005, branch ``watchers``). Both are written in one
transaction, after the events they account for were handed to the producer, so a restart
resumes exactly where the published history ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from consumers.watchers.publisher import Marker
from ledger.store.base import EventStore
from ledger.store.watcher_tables import watcher_objects

__all__ = ["WatcherCheckpoints", "WatcherResume", "watcher_objects"]


@dataclass(frozen=True, slots=True)
class WatcherResume:
    rvs: dict[str, int]
    state: dict[str, dict[str, Any]]


class WatcherCheckpoints:
    """Load and save one watcher's resume point."""

    def __init__(self, store: EventStore, watcher: str) -> None:
        self.store = store
        self.watcher = watcher
        self.prefix = f"watch:{watcher}:"

    def load(self) -> WatcherResume:
        with self.store.snapshot() as uow:  # the resource versions and states of one instant
            conn = uow.connection
            rvs = {
                checkpoint.name[len(self.prefix) :]: int(checkpoint.offsets["rv"])
                for checkpoint in uow.checkpoints(self.prefix)
                if "rv" in checkpoint.offsets
            }
            state = {
                key: dict(value)
                for key, value in conn.execute(
                    select(watcher_objects.c.key, watcher_objects.c.state).where(
                        watcher_objects.c.watcher == self.watcher
                    )
                ).all()
            }
        return WatcherResume(rvs, state)

    def save(self, marker: Marker) -> None:
        self.save_parts(marker.rvs, marker.changes)

    def save_parts(
        self, rvs: Mapping[str, int], changes: Mapping[str, Mapping[str, Any] | None]
    ) -> None:
        upserts = [
            {"watcher": self.watcher, "key": k, "state": dict(v)}
            for k, v in changes.items()
            if v is not None
        ]
        gone = [k for k, v in changes.items() if v is None]
        with self.store.transaction() as uow:
            conn = uow.connection
            if upserts:
                stmt = pg_insert(watcher_objects)
                conn.execute(
                    stmt.on_conflict_do_update(
                        index_elements=["watcher", "key"], set_={"state": stmt.excluded.state}
                    ),
                    upserts,
                )
            if gone:
                conn.execute(
                    delete(watcher_objects).where(
                        watcher_objects.c.watcher == self.watcher, watcher_objects.c.key.in_(gone)
                    )
                )
            for resource, rv in sorted(rvs.items()):
                uow.save_checkpoint(self.prefix + resource, offsets={"rv": rv})

    def forget(self) -> None:
        """Drop this watcher's resume point (the next start relists everything)."""
        with self.store.transaction() as uow:
            conn = uow.connection
            conn.execute(delete(watcher_objects).where(watcher_objects.c.watcher == self.watcher))
            uow.delete_checkpoints(self.prefix)
