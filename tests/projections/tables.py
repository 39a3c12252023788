"""Every row of some projections' tables, for row-for-row comparisons (rebuild = incremental)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Table, select

from ledger.store.postgres import PostgresEventStore
from projections.base import Projection

__all__ = ["snapshot"]


def snapshot(
    store: PostgresEventStore, projections: Iterable[Projection]
) -> dict[str, list[tuple[Any, ...]]]:
    """Table name -> its rows in primary-key order."""
    out = {}
    with store.engine.connect() as conn:
        for projection in projections:
            for table in projection.tables:
                assert isinstance(table, Table)
                keys = list(table.primary_key.columns)
                out[table.name] = [tuple(r) for r in conn.execute(select(table).order_by(*keys))]
    return out
