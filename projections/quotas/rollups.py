"""Hourly rollups of the settled quota rows: a usage series as one range read.

A point of a usage series is every node x flavor settled under the tree in force
(:class:`~ledger.usage_boards.UsageBoard`): borrowing and lending are not sums, so they
cannot be pre-added like the raw changes. What can be kept is the settled board itself at
each hour where something changed (a change at ``t`` first shows at the hour point
``t`` rounds up to): at any hour between two of those the board is the earlier one's.

``quota_rollup_state.valid_before`` says how far the kept boards are right: every hour
point before it is. The projection moves it back when a page changes usage or the tree at
an earlier instant (:func:`mark_changed`, in the page's transaction), and its maintenance
after a catch-up rebuilds the boards from there (:mod:`projections.quotas.rollup_builds`).
``complete``: nothing past ``valid_before`` is left to build, so every later point is the
last board. A reader never depends on the maintenance having run: the points it does not
cover are derived from the changes (:func:`projections.quotas.reads.usage_series`).
"""

from __future__ import annotations

import bisect
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, text

from ledger.usage_boards import NUMBERS
from projections.quotas.buckets import hour_of

__all__ = ["RollupState", "ceil_hour", "mark_changed", "rollup_series", "rollup_state"]

_HOUR = timedelta(hours=1)
_NUMBER_COLS = ", ".join(f"r.{n}" for n in NUMBERS)

RollupState = tuple[datetime | None, bool]  # (valid_before, complete)


def ceil_hour(at: datetime) -> datetime:
    """The first hour point at or after ``at``: the first one a change at ``at`` shows in."""
    hour = hour_of(at)
    return hour if hour == at else hour + _HOUR


def mark_changed(conn: Connection, since: datetime) -> None:
    """Usage or the tree changed at ``since`` (a page's earliest change): hour points from
    ``ceil_hour(since)`` on are no longer right."""
    conn.execute(
        text(
            "INSERT INTO quota_rollup_state (id, valid_before, complete) VALUES (1, NULL, false) "
            "ON CONFLICT (id) DO UPDATE SET complete = false, valid_before = CASE "
            "WHEN quota_rollup_state.valid_before IS NULL THEN NULL "
            "ELSE least(quota_rollup_state.valid_before, :first) END"
        ),
        {"first": ceil_hour(since)},
    )


def rollup_state(conn: Connection, *, for_update: bool = False) -> RollupState | None:
    """The state row (None: no rollup built since the tables were emptied)."""
    row = conn.execute(
        text(
            "SELECT valid_before, complete FROM quota_rollup_state WHERE id = 1"
            + (" FOR UPDATE" if for_update else "")
        )
    ).one_or_none()
    return None if row is None else (row[0], row[1])


def rollup_series(
    conn: Connection,
    points: list[datetime],
    *,
    quota: str | None = None,
    flavor: str | None = None,
) -> tuple[int, list[tuple[Any, ...]]]:
    """How many of ``points`` (ascending) the rollups cover, from the first, and their rows:
    ``(at, quota, flavor, *NUMBERS)`` per point, ordered as a board's keys sort."""
    state = rollup_state(conn)
    if state is None or not points:
        return 0, []
    valid_before, complete = state
    if complete:
        covered = len(points)
    elif valid_before is None:
        return 0, []
    else:
        covered = bisect.bisect_left(points, valid_before)
    # only hour points: between two hours a change shows before its hour's board does
    covered = next((i for i, p in enumerate(points[:covered]) if hour_of(p) != p), covered)
    if covered == 0:
        return 0, []
    where, params = "", {"points": points[:covered], "quota": quota, "flavor": flavor}
    if quota is not None:
        where += " AND r.quota = :quota"
    if flavor is not None:
        where += " AND r.flavor = :flavor"
    rows = conn.execute(
        text(
            f"SELECT p.at, r.quota, r.flavor, {_NUMBER_COLS} "
            "FROM unnest(CAST(:points AS timestamptz[])) AS p(at) "
            "CROSS JOIN LATERAL (SELECT max(hour) AS hour FROM quota_rollup_hours "
            "WHERE hour <= p.at) m "
            f"JOIN quota_rollup_rows r ON r.hour = m.hour{where} "
            'ORDER BY p.at, r.quota COLLATE "C", r.flavor COLLATE "C"'
        ),
        params,
    )
    return covered, [tuple(row) for row in rows]
