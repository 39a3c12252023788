"""The projection contract the runner drives.

A projection owns some tables (created by Alembic migrations) and folds pages of
recorded events into them. The runner calls :meth:`Projection.apply` inside the
same database transaction that advances the projection's checkpoint, so a page
is applied exactly once whatever crashes in between. It hands the projection that
transaction twice: as the store port's unit of work, for any further events it must
read (they are the events of that transaction), and as the SQLAlchemy connection its
rows are written on (read models are PostgreSQL tables by design). Projections must be
deterministic functions of the events (never of the wall clock), so dropping
and replaying gives the same rows byte for byte.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

from sqlalchemy import Connection, Table

from ledger.store.base import RecordedEvent, UnitOfWork

__all__ = ["Projection"]


class Projection(abc.ABC):
    #: Unique name; the checkpoint is stored as ``projection:<name>``.
    name: str = ""
    #: Tables this projection owns; ``rebuild`` empties them before replaying.
    tables: Sequence[Table] = ()
    #: Event types this projection reads (empty: all). Lets the runner skip pages cheaply.
    event_types: frozenset[str] = frozenset()
    #: Relative cost per stored event of applying it, reading it aside (a lane reads
    #: each page once for all its projections), so the runner can balance projections
    #: over parallel lanes. Only the ratios matter. Measured as client + server CPU of
    #: the projection rebuilt alone minus that of reading the same events
    #: (``python -m bench project --each``; ``docs/projections.md``, "Lanes").
    cost: float = 1.0

    @abc.abstractmethod
    def apply(self, uow: UnitOfWork, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        """Fold one page of events (position order) into the tables, on ``conn`` (the
        connection of ``uow``, the unit of work the page was read in)."""

    def maintain(self, conn: Connection) -> bool:
        """Keep tables derived from the projected rows (not from events) up to date, a
        bounded step per call, after a catch-up; returns whether more remains. Whatever
        it builds must depend only on the events, never on when it ran."""
        return False

    def reset(self, conn: Connection) -> None:
        """Empty the owned tables (rebuild). Override when rows outside ``tables`` exist."""
        for table in reversed(self.tables):
            conn.execute(table.delete())
