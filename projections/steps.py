"""One exactly-once projection step inside the caller's transaction.

Shared by the projector runner (:mod:`consumers.projector`, one transaction per
step) and by the billing rater, which must bring the billing tables to the head
inside its own transaction while it holds the store's append lock. Both use the
same checkpoint rows, so neither ever applies a window the other already applied.

A step locks the candidates' checkpoint rows (sorted: two runners never
deadlock), reads the head *after* the locks, then reads the next window of
positions once for every candidate standing at the lowest position. The store
assigns dense positions in commit order (``docs/store.md``), so a window ending at
or below the visible head is complete, and event-type filters can go into the
query without losing track of how far a projection got.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, text

from ledger.store.postgres import PostgresEventStore
from projections.base import Projection

__all__ = ["advance_on", "checkpoint_name"]


def checkpoint_name(projection: Projection) -> str:
    return f"projection:{projection.name}"


def advance_on(
    conn: Connection,
    candidates: Sequence[Projection],
    *,
    page_size: int,
    until: int | None = None,
) -> int:
    """One step for the candidates furthest behind, on ``conn``; returns positions covered."""
    names = sorted(checkpoint_name(p) for p in candidates)
    conn.execute(
        text(
            "INSERT INTO checkpoints (name, position, offsets, updated_at) "
            "SELECT n, 0, '{}'::jsonb, now() FROM unnest(CAST(:names AS text[])) n "
            "ON CONFLICT (name) DO NOTHING"
        ),
        {"names": names},
    )
    locked: dict[str, int] = dict(
        conn.execute(
            text(
                "SELECT name, position FROM checkpoints "
                "WHERE name = ANY(CAST(:names AS text[])) ORDER BY name FOR UPDATE"
            ),
            {"names": names},
        ).all()
    )
    head = PostgresEventStore.head_position_on(conn)
    if until is not None:
        head = min(head, until)
    positions = {p.name: int(locked[checkpoint_name(p)]) for p in candidates}
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
    page = PostgresEventStore.read_window_on(
        conn, low, upto, None if wanted is None else sorted(wanted)
    )
    for projection in group:
        types = projection.event_types
        relevant = [r for r in page if r.type in types] if types else page
        if relevant:
            projection.apply(conn, relevant)
    conn.execute(
        text(
            "UPDATE checkpoints SET position = :p, updated_at = now() "
            "WHERE name = ANY(CAST(:names AS text[]))"
        ),
        {"p": upto, "names": [checkpoint_name(p) for p in group]},
    )
    return upto - low
