"""Read models on demand: catch them up, rebuild them from position 0, report their lag.

Projections are disposable: a rebuild empties one and replays the whole store into it
(then vacuums its tables). The CLI's ``project`` and ``projections rebuild|status`` and
an API's admin calls use these; tailing with ``--follow`` and lanes in child processes
stay with the process that owns the signals (:mod:`dlc_ledger.cli.projections`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

from consumers.projector import DEFAULT_PAGE, ProjectionStatus, Projector
from dlc_ledger.services.errors import NotFound
from ledger.store.postgres import PostgresEventStore
from projections.base import Projection
from projections.registry import all_projections, projection_named

__all__ = [
    "Applied",
    "ProjectionStatus",
    "catch_up",
    "projection_status",
    "rebuild",
    "select_projections",
    "timed",
]


@dataclass(frozen=True)
class Applied:
    """How many events a catch-up or rebuild applied, and in how long."""

    events: int
    seconds: float
    name: str | None = None  # the projection rebuilt; None: a catch-up of several

    @property
    def per_second(self) -> float | None:
        return self.events / self.seconds if self.events and self.seconds > 0 else None


def select_projections(name: str | None) -> list[Projection]:
    """The registered projection called ``name``, or every one when ``name`` is None."""
    if name is None:
        return all_projections()
    try:
        return [projection_named(name)]
    except ValueError as exc:
        raise NotFound(str(exc)) from None


def timed(run: Callable[[], int], name: str | None = None) -> Applied:
    """Run a catch-up (anything returning the events it applied) and time it."""
    started = time.perf_counter()
    events = run()
    return Applied(events, time.perf_counter() - started, name)


def catch_up(
    store: PostgresEventStore, name: str | None = None, *, page_size: int = DEFAULT_PAGE
) -> Applied:
    """Bring one projection (or all) up to the store's head; each page commits with its
    checkpoint, so an interruption loses nothing."""
    projector = Projector(store, select_projections(name), page_size=page_size)
    return timed(projector.catch_up)


def rebuild(
    store: PostgresEventStore, name: str | None = None, *, page_size: int = DEFAULT_PAGE
) -> Iterator[Applied]:
    """Empty each chosen projection, replay the whole store into it and vacuum (analyze)
    its tables, one after another; yields each as it finishes."""
    projector = Projector(store, select_projections(name), page_size=page_size)
    for projection in projector.projections:
        yield timed(partial(projector.rebuild, projection), projection.name)


def projection_status(store: PostgresEventStore) -> list[ProjectionStatus]:
    """Position, store head and lag of every registered projection."""
    return Projector(store, all_projections()).status()
