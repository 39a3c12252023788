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
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.store.base import EventStore, UnitOfWork
from projections.base import Projection

__all__ = ["CHECKPOINT_PREFIX", "advance_on", "catch_up", "checkpoint_name"]


#: Every projection's checkpoint is named ``projection:<name>``.
CHECKPOINT_PREFIX = "projection:"


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
    conn = uow.connection
    for projection in group:
        types = projection.event_types
        relevant = [r for r in page if r.type in types] if types else page
        if relevant:
            projection.apply(uow, conn, relevant)
    for projection in group:
        uow.save_checkpoint(checkpoint_name(projection), position=upto)
    return upto - low


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
