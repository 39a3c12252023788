"""Building the hourly rollups (:mod:`projections.quotas.rollups`) after a catch-up.

The quota projection's maintenance step: from ``valid_before`` on, the hour points where
something changed are walked in order (:func:`~projections.quotas.reads.board_walk`), a
bounded number per call, and each one's settled board is kept. Built from the projected
changes alone, so the rows depend only on the events, never on when this ran.

The hour points: for every hour ``F`` holding a change (``quota_change_hours``) or a tree
change, ``F`` itself (a change exactly on the hour shows there) and ``F + 1h``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, text

from projections.bulk import copy_table
from projections.quotas.buckets import hour_of
from projections.quotas.reads import board_walk
from projections.quotas.rollups import rollup_state
from projections.quotas.tables import quota_rollup_hours, quota_rollup_rows

__all__ = ["HOURS_PER_STEP", "extend_rollups"]

_HOUR = timedelta(hours=1)
#: hours with changes read per call (one transaction each): about twice as many points
#: walked, each ~1 ms of CPU and one row per node x flavor
HOURS_PER_STEP = 200


def extend_rollups(conn: Connection, *, hours: int = HOURS_PER_STEP) -> bool:
    """Build the boards of at most ``hours`` changed hours past ``valid_before``; returns
    whether more remain."""
    hours = max(hours, 2)  # one hour read may yield no point past ``valid_before``
    state = rollup_state(conn, for_update=True)
    if state is None:
        conn.execute(
            text(
                "INSERT INTO quota_rollup_state (id, valid_before, complete) "
                "VALUES (1, NULL, false)"
            )
        )
    elif state[1]:
        return False
    start = None if state is None else state[0]
    # the hour before ``start``: a change in it shows at ``start``
    params = {} if start is None else {"low": start - _HOUR}
    hours_since = "" if start is None else " WHERE hour >= :low"
    tree_since = "" if start is None else " WHERE at >= :low"
    changed = list(
        conn.execute(
            text(
                f"SELECT DISTINCT hour FROM quota_change_hours{hours_since} ORDER BY hour LIMIT :n"
            ),
            {**params, "n": hours},
        ).scalars()
    )
    more = len(changed) == hours
    tree = conn.execute(
        text(f"SELECT DISTINCT at FROM quota_tree_history{tree_since}"),
        params,
    ).scalars()
    points = {h for f in changed for h in (f, f + _HOUR)}
    points.update(h for at in tree for h in (hour_of(at), hour_of(at) + _HOUR))
    if more:  # hours past the last one read may hold changes not read yet
        points = {p for p in points if p <= changed[-1]}
    walk = sorted(p for p in points if start is None or p >= start)
    where = "" if start is None else " WHERE hour >= :start"
    conn.execute(text(f"DELETE FROM quota_rollup_rows{where}"), {"start": start})
    conn.execute(text(f"DELETE FROM quota_rollup_hours{where}"), {"start": start})
    if walk:
        rows: list[tuple[Any, ...]] = []
        for at, board in board_walk(conn, walk, "hour", None):
            rows.extend((at, q, f, *numbers) for (q, f), numbers in board.rows.items())
        copy_table(conn, quota_rollup_hours, [(at,) for at in walk])
        copy_table(conn, quota_rollup_rows, rows)
    valid_before = changed[-1] + _HOUR if more else (walk[-1] + _HOUR if walk else start)
    conn.execute(
        text("UPDATE quota_rollup_state SET valid_before = :v, complete = :done WHERE id = 1"),
        {"v": valid_before, "done": not more},
    )
    return more
