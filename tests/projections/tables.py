"""Every row of some projections' tables, for row-for-row comparisons (rebuild = incremental).

One table is compared by what it holds rather than row by row: ``quota_changes`` has a
row per instant and quota *within a page* (a page sums its events' changes at one
instant), so pages that split an instant's events differently write different rows
with the same net change per instant, quota and flavor, which is all readers see.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, Table, select, text

from ledger.store.postgres import PostgresEventStore
from projections.base import Projection
from projections.quota_reads import CHANGE_SUMS

__all__ = ["net_quota_changes", "snapshot"]


def net_quota_changes(conn: Connection) -> list[tuple[Any, ...]]:
    """``quota_changes`` as (at, quota, flavor, its net raw changes), zero nets left out."""
    rows = conn.execute(
        text(
            f"SELECT at, quota, d.key, {CHANGE_SUMS} FROM quota_changes "
            "CROSS JOIN LATERAL jsonb_each(changes) d GROUP BY at, quota, d.key "
            "ORDER BY at, quota, d.key"
        )
    )
    return [tuple(r) for r in rows if any(r[3:])]


def snapshot(
    store: PostgresEventStore, projections: Iterable[Projection]
) -> dict[str, list[tuple[Any, ...]]]:
    """Table name -> its rows in primary-key order."""
    out = {}
    with store.engine.connect() as conn:
        for projection in projections:
            for table in projection.tables:
                assert isinstance(table, Table)
                if table.name == "quota_changes":
                    out[table.name] = net_quota_changes(conn)
                    continue
                keys = list(table.primary_key.columns)
                out[table.name] = [tuple(r) for r in conn.execute(select(table).order_by(*keys))]
    return out
