"""One exactly-once projection step inside the caller's transaction.

Shared by the projector runner (:mod:`consumers.projector`, one transaction per
step) and by the billing rater, which must bring the billing tables to the head
inside its own transaction while it holds the store's append lock. Both use the
same checkpoint rows, so neither ever applies a window the other already applied.

A step locks the candidates' checkpoints (:meth:`UnitOfWork.lock_checkpoints`: two
runners never deadlock), reads the head *after* the locks, then reads the next window
of positions once, in one query, for every candidate standing at the lowest position.
Events are read and checkpoints kept through the store port's unit of work; the
projections write their rows on its connection. The store
assigns dense positions in commit order (``docs/store.md``), so a window ending at
or below the visible head is complete, and event-type filters can go into the
query without losing track of how far a projection got.

Poison. A stored event a projection's fold raises on (a value that passed validation but
overflows the fold's arithmetic, a number a column cannot hold: :func:`is_poison`) must
not stop the projector, nor make it crash-loop on the same window at every restart. The
page is applied in a savepoint; when it fails with a poison the step finds the first event
whose fold fails after the events accepted before it (a bisection over prefixes, each
tried in a savepoint rolled back), applies the events before it, records it as a dead
letter (source ``projection:<name>``, reason ``fold-failed``, payload the event's id,
type and position), skips it, and goes on with the rest of the page; the checkpoint
passes it in the same transaction. Any other failure (an outage, a bug) still stops the
step with nothing applied.

The skip is deterministic: whether an event is skipped depends only on the events
accepted before it (a fold is a function of its events, whatever the pages), so a rebuild
skips exactly the events the live projector skipped (the dead letter is seen again:
its count bumps, a resolved one reopens). Once the code can fold it, ``dlc-ledger
dead-letters retry ID`` rebuilds the projection, which folds it (:mod:`dlc_ledger.services.
dead_letters`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import orjson

from ledger.store.base import EventStore, RecordedEvent, UnitOfWork
from ledger.store.failures import is_poison
from projections.base import Projection

__all__ = [
    "CHECKPOINT_PREFIX",
    "POISON_REASON",
    "advance_on",
    "catch_up",
    "checkpoint_name",
]

log = logging.getLogger(__name__)


#: Every projection's checkpoint is named ``projection:<name>``.
CHECKPOINT_PREFIX = "projection:"
#: The reason of a dead letter for an event a projection's fold raised on.
POISON_REASON = "fold-failed"


def checkpoint_name(projection: Projection) -> str:
    return f"{CHECKPOINT_PREFIX}{projection.name}"


def advance_on(
    uow: UnitOfWork,
    candidates: Sequence[Projection],
    *,
    page_size: int,
    until: int | None = None,
) -> int:
    """One step for the candidates furthest behind, in ``uow``; returns positions covered.

    Their rows are written on the unit's connection, in its transaction."""
    locked = uow.lock_checkpoints([checkpoint_name(p) for p in candidates])
    head = uow.head_position()
    if until is not None:
        head = min(head, until)
    positions = {p.name: locked[checkpoint_name(p)] for p in candidates}
    low = min(positions.values())
    if low >= head:
        return 0
    group = [p for p in candidates if positions[p.name] == low]
    ahead = [pos for pos in positions.values() if pos > low]
    upto = min([low + page_size, head, *ahead])
    wanted: set[str] | None = set()
    for projection in group:
        if not projection.event_types:
            wanted = None
            break
        assert wanted is not None
        wanted |= projection.event_types
    page = uow.read_window(low, upto, wanted)
    for projection in group:
        types = projection.event_types
        relevant = [r for r in page if r.type in types] if types else page
        if relevant:
            _apply_isolating(uow, projection, relevant)
    for projection in group:
        uow.save_checkpoint(checkpoint_name(projection), position=upto)
    return upto - low


def _apply_isolating(
    uow: UnitOfWork, projection: Projection, events: Sequence[RecordedEvent]
) -> None:
    """Apply ``events`` to ``projection``, skipping (and dead-lettering) each poison one."""
    rest = list(events)
    while rest:
        failure = _attempt(uow, projection, rest, keep=True)
        if failure is None:
            return
        # rest[:hi] fails and rest[:lo - 1] applies: find the shortest failing prefix
        lo, hi = 1, len(rest)
        while lo < hi:
            mid = (lo + hi) // 2
            probe = _attempt(uow, projection, rest[:mid], keep=False)
            if probe is None:
                lo = mid + 1
            else:
                hi, failure = mid, probe
        if lo > 1 and (again := _attempt(uow, projection, rest[: lo - 1], keep=True)):
            raise again  # it applied in the probe: not a function of its events (a bug)
        _quarantine(uow, projection, rest[lo - 1], failure)
        rest = rest[lo:]


def _attempt(
    uow: UnitOfWork, projection: Projection, events: Sequence[RecordedEvent], *, keep: bool
) -> Exception | None:
    """Apply ``events`` in a savepoint, kept (``keep``) or always rolled back; the poison
    it failed with, None if it applied. Any other exception propagates."""
    conn = uow.connection
    savepoint = conn.begin_nested()
    try:
        projection.apply(uow, conn, events)
    except Exception as exc:
        savepoint.rollback()
        if not is_poison(exc):
            raise
        return exc
    if keep:
        savepoint.commit()
    else:
        savepoint.rollback()
    return None


def _quarantine(
    uow: UnitOfWork, projection: Projection, event: RecordedEvent, exc: Exception
) -> None:
    log.warning(
        "projection %s: event %s (%s, position %d) skipped, dead-lettered: %s",
        projection.name,
        event.event_id,
        event.type,
        event.position,
        exc,
    )
    uow.record_dead_letter(
        source=checkpoint_name(projection),
        reason=POISON_REASON,
        error=f"{event.type} {event.event_id} at position {event.position}: "
        f"{type(exc).__name__}: {exc}",
        payload=orjson.dumps(
            {
                "projection": projection.name,
                "event_id": str(event.event_id),
                "type": event.type,
                "position": event.position,
            }
        ),
    )


def catch_up(
    store: EventStore, projections: Sequence[Projection], *, page_size: int = 50_000
) -> int:
    """Bring ``projections`` to the store's head, one transaction per step: what a write use
    case does right after its append, so the reads after it are current (reads never do
    this themselves). Returns the positions covered; a read-only role covers none (its
    write was refused already: the projector catches up)."""
    if not store.may_write():
        return 0
    covered = 0
    while True:
        with store.transaction() as uow:
            step = advance_on(uow, projections, page_size=page_size)
        if not step:
            return covered
        covered += step
