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

Tailing waits on the store's append signal (:meth:`EventStore.appends`: PostgreSQL's
``LISTEN dlc_events``, notified by each append) with a polling fallback, so an idle
runner costs nothing and a busy one never sleeps.

Poison never stops it (issue 44): an event a fold raises on is skipped and dead-lettered
inside the step (:mod:`projections.steps`, where the rule and its determinism are); a
maintenance step that raises on a projected value (:func:`ledger.store.failures.is_poison`)
is rolled back and dead-lettered (source ``projection:<name>``, reason
``maintain-failed``), and that projection's maintenance waits for the next catch-up, while
its events keep being folded. Any other failure still stops the runner.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import orjson

from consumers.projector_metrics import record_status
from ledger.errors import Invalid
from ledger.store.base import EventStore
from ledger.store.failures import is_poison
from projections.base import Projection
from projections.steps import advance_on, checkpoint_name

__all__ = [
    "DEFAULT_PAGE",
    "ProjectionStatus",
    "Projector",
    "StopFlag",
    "catch_up_if_behind",
    "caught_up",
    "checkpoint_name",
]

log = logging.getLogger(__name__)

#: The reason of a dead letter for a projection's maintenance step that raised.
MAINTAIN_FAILED = "maintain-failed"

# A job's rows (state, quota state, occupancies) are written back in every page that
# names it, so a page that holds a job's start and its end writes them once, not twice;
# and every page pays fixed costs (checkpoint locks, the quota tree and bindings, upserts'
# temporary tables). In a busy store a job's events span thousands of positions (the
# bench's replay shape: ~10,000). 1,000,000 bench events in two lanes, alternating runs:
# pages of 50,000 took 24.7-26.0 s and 46.8-48.7 s of CPU, pages of 20,000 30.6-35.4 s and
# 56.8-66.4 s; with jobs spanning ~50,000 positions (``--window 10000``), 34.0-38.7 s
# against 40.0-41.1 s. Pages of 100,000 gained nothing more. The price is memory: a
# lane's peak RSS is ~260 MB at 50,000, ~150 MB at 20,000 (decoded events dominate). A
# tailing runner's pages are only as big as its backlog, so this bounds catch-ups and
# rebuilds, not live latency.
DEFAULT_PAGE = 50_000


class StopFlag(Protocol):
    """What ends a live runner: a ``threading.Event`` or a ``multiprocessing`` one."""

    def is_set(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class ProjectionStatus:
    name: str
    position: int
    head: int

    @property
    def lag(self) -> int:
        return self.head - self.position


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause CPython's cyclic garbage collector for one step.

    A page allocates hundreds of thousands of small objects (decoded events, rows) that
    all live until the step commits, so the collector's allocation-count trigger keeps
    rescanning them, and every other live object, for nothing: 30% of a quota rebuild
    on openb. Reference counting still frees everything as usual; the cycles a step
    leaves (few) are collected after it.
    """
    if not gc.isenabled():  # already paused (a caller's, or another thread's, step)
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class Projector:
    def __init__(
        self,
        store: EventStore,
        projections: Sequence[Projection],
        *,
        page_size: int = DEFAULT_PAGE,
    ) -> None:
        names = [p.name for p in projections]
        if len(set(names)) != len(names) or not all(names):
            raise Invalid(f"projection names must be unique and non-empty: {names}")
        self.store = store
        self.projections = list(projections)
        self.page_size = page_size

    def step(self, projection: Projection) -> int:
        """Advance ``projection`` alone by at most one page; returns positions covered."""
        return self._advance([projection])

    def catch_up(self, *, until: int | None = None, stop: StopFlag | None = None) -> int:
        """Run every projection up to the store's head (or ``until``, or until ``stop`` is
        set: checked between steps); returns positions covered."""
        total = 0
        while not (stop is not None and stop.is_set()) and (
            covered := self._advance(self.projections, until=until)
        ):
            total += covered
        self.maintain(self.projections, stop=stop)
        return total

    def maintain(self, projections: Sequence[Projection], *, stop: StopFlag | None = None) -> None:
        """Each projection's maintenance (:meth:`Projection.maintain`), a step per
        transaction, until none has more or ``stop`` is set."""
        for projection in projections:
            while not (stop is not None and stop.is_set()):
                try:
                    with self.store.transaction() as uow:
                        if not projection.maintain(uow.connection):
                            break
                except Exception as exc:
                    if not is_poison(exc):
                        raise
                    self._maintenance_failed(projection, exc)
                    break

    def _maintenance_failed(self, projection: Projection, exc: Exception) -> None:
        log.warning(
            "projection %s: maintenance failed, left for later: %s",
            projection.name,
            exc,
            exc_info=exc,
        )
        with self.store.transaction() as uow:
            uow.record_dead_letter(
                source=checkpoint_name(projection),
                reason=MAINTAIN_FAILED,
                error=f"maintenance of {projection.name}: {type(exc).__name__}: {exc}",
                payload=orjson.dumps({"projection": projection.name, "step": "maintain"}),
            )

    def _advance(self, candidates: Sequence[Projection], *, until: int | None = None) -> int:
        """One step for the candidates furthest behind, in its own transaction."""
        with _collector_paused(), self.store.transaction() as uow:
            # A step lost in a crash after its commit is simply applied again from the old
            # checkpoint (rows and checkpoint commit together), so it need not wait for the
            # WAL flush; the store's appends keep full durability. Statements repeat every
            # step with key lists of varying length, and a generic plan cached for them
            # guesses the length and may scan whole tables: plan each execution.
            uow.connection.exec_driver_sql(
                "SET LOCAL synchronous_commit = off; SET LOCAL plan_cache_mode = force_custom_plan"
            )
            return advance_on(uow, candidates, page_size=self.page_size, until=until)

    def position(self, projection: Projection) -> int:
        with self.store.transaction() as uow:
            return uow.load_checkpoint(checkpoint_name(projection)).position

    def status(self) -> list[ProjectionStatus]:
        head = self.store.head_position()
        return [ProjectionStatus(p.name, self.position(p), head) for p in self.projections]

    def reset(self, projection: Projection) -> None:
        """Empty the projection and move its checkpoint back to position 0."""
        with self.store.transaction() as uow:
            uow.load_checkpoint(checkpoint_name(projection), for_update=True)
            projection.reset(uow.connection)
            uow.save_checkpoint(checkpoint_name(projection), position=0)

    def rebuild(self, projection: Projection) -> int:
        """Empty the projection, replay the whole store into it, then vacuum and analyze
        its tables."""
        self.reset(projection)
        read = 0
        while step := self.step(projection):
            read += step
        self.maintain([projection])
        self.tidy(projection)
        return read

    def tidy(self, projection: Projection) -> None:
        """VACUUM (ANALYZE) the projection's tables.

        A reset deletes every row, so after a rebuild a table holds as many dead rows as
        live ones and, where autovacuum lags or is off, no statistics: readers' plans then
        scan dead rows (``quota-usage --at`` mid-history on openb: 587-706 ms right after a
        rebuild, 107-272 ms after a catch-up). Not being the tables' owner only makes
        PostgreSQL skip them with a warning.
        """
        names = ", ".join(f'"{t.name}"' for t in projection.tables)
        if not names:
            return
        with self.store.outside_transaction() as conn:  # VACUUM cannot run in a transaction
            conn.exec_driver_sql(f"VACUUM (ANALYZE) {names}")

    def run_forever(self, stop: StopFlag, *, poll_interval: float = 2.0) -> None:
        """Tail live: catch up, then wait for a NOTIFY (or the poll interval), repeat."""
        # listening before the first catch-up: an append committed in between still wakes it
        with self.store.appends() as appended:
            while not stop.is_set():
                covered = self.catch_up()
                record_status(covered, self.status())
                if covered == 0:
                    appended.wait(poll_interval)


def caught_up(store: EventStore, projections: Sequence[Projection]) -> bool:
    """Whether every one of ``projections`` has projected the store's head, read in one
    read-only snapshot (no lock, no write)."""
    with store.snapshot() as uow:
        head = uow.head_position()
        return all(uow.load_checkpoint(checkpoint_name(p)).position >= head for p in projections)


def catch_up_if_behind(store: EventStore, projections: Sequence[Projection]) -> None:
    """Bring ``projections`` to the store's head before a consumer decides from them (the
    live dispatcher's refresh, ``dispatch --no-project`` turns it off). Reads never do this
    (``docs/CONVENTIONS.md``, "Reads never write").

    A read-only role (``dlc_ledger_reader``) may not move a checkpoint: it decides from the
    projections as the projector left them, and one line on stderr says how far behind.

    Read-only first: when every checkpoint is at the head already (the usual case, the
    projector running beside it) nothing is locked or written. A catch-up step takes its
    checkpoints ``FOR UPDATE`` in a write transaction, which made concurrent callers of one
    projection queue behind each other for nothing (``python -m bench api``)."""
    if caught_up(store, projections):
        return
    projector = Projector(store, projections)
    if store.may_write():
        projector.catch_up()
        return
    lag = max((s.lag for s in projector.status()), default=0)
    if lag:
        names = ", ".join(p.name for p in projections)
        print(
            f"note: read-only database role: {names} shown as projected, {lag} events behind "
            "the store (the projector catches up)",
            file=sys.stderr,
        )
