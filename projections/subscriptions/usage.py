"""The occupancies the utilisation report weighs against subscribed capacity.

Read from the billing room's occupancies (each with its billing mode as rated: a job of a
quota drawing on groups is ``quota``), GPU occupancies only, those that overlap the window;
an open one counts up to the window's end.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, text

from ledger.subscriptions.utilisation import OccupancySpan

__all__ = ["gpu_spans"]


def gpu_spans(conn: Connection, start: datetime, end: datetime) -> list[OccupancySpan]:
    rows = conn.execute(
        text(
            "SELECT quota, workspace, billing_mode, mgpu, started_at, "
            "coalesce(ended_at, CAST(:end AS timestamptz)) "
            "FROM billing_occupancies WHERE mgpu > 0 AND started_at IS NOT NULL "
            "AND started_at < CAST(:end AS timestamptz) "
            "AND (ended_at IS NULL OR ended_at > CAST(:start AS timestamptz))"
        ),
        {"start": start, "end": end},
    ).all()
    return [OccupancySpan(q, w, m or "public", int(g), s, e) for q, w, m, g, s, e in rows]
