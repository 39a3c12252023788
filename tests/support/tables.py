"""Every row of some projections' tables, for row-for-row comparisons (rebuild = incremental).

Two tables are compared by what they hold rather than row by row: ``quota_changes`` has a
row per instant and quota *within a page* (a page sums its events' changes at one
instant), so pages that split an instant's events differently write different rows
with the same net change per instant, quota and flavor, which is all readers see; and
``quota_change_hours`` / ``quota_change_days`` sum them per hour / day, so the same splits
leave all-zero rows in one and none in the other: rows whose sums are all zero are left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, Table, select, text

from ledger.store.postgres import PostgresEventStore
from projections.base import Projection
from projections.quotas.reads import CHANGE_SUMS

__all__ = ["net_quota_changes", "snapshot", "table_rows"]


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


def table_rows(conn: Connection, table: Table) -> list[tuple[Any, ...]]:
    """``table``'s rows in primary-key order (the quota sums as nets: see above)."""
    if table.name == "quota_changes":
        return net_quota_changes(conn)
    keys = list(table.primary_key.columns)
    rows = [tuple(r) for r in conn.execute(select(table).order_by(*keys))]
    if table.name in ("quota_change_hours", "quota_change_days"):
        rows = [r for r in rows if any(r[3:])]
    return rows


def snapshot(
    store: PostgresEventStore, projections: Iterable[Projection]
) -> dict[str, list[tuple[Any, ...]]]:
    """Table name -> its rows in primary-key order."""
    out = {}
    with store.engine.connect() as conn:
        for projection in projections:
            for table in projection.tables:
                assert isinstance(table, Table)
                out[table.name] = table_rows(conn, table)
    return out
