"""The quotas migration branch upgrades, downgrades and upgrades again."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any

import pytest
from sqlalchemy import Connection, Table, inspect

from consumers.projector import Projector
from ledger.store.engines import make_engine
from ledger.store.postgres import PostgresEventStore
from migrations.runner import downgrade, upgrade
from projections.quotas.buckets import day_of, hour_of
from projections.quotas.projection import QuotaProjection
from projections.quotas.tables import quota_change_days, quota_change_hours
from tests.projections.quotas.test_quota_projection import TREE
from tests.support.databases import TemplateDatabases
from tests.support.quotas import at, occ_ended, occ_started, submitted, tree_events
from tests.support.tables import net_quota_changes, table_rows

TABLES = {"quota_nodes", "quota_workspaces", "quota_changes", "quota_tree_history"}
OLD = {"quota_usage", "quota_usage_history", "quota_projection_state"}


def test_quotas_branch_up_down_up(databases: TemplateDatabases) -> None:
    url = databases.empty()
    engine = make_engine(url)
    try:
        upgrade(engine)
        names = set(inspect(engine).get_table_names())
        assert names >= TABLES and not OLD & names
        downgrade(engine, "0003")  # back to the stamped change points
        names = set(inspect(engine).get_table_names())
        assert names >= OLD and not {"quota_changes", "quota_tree_history"} & names
        downgrade(engine, "quotas@0001")
        names = set(inspect(engine).get_table_names())
        assert not TABLES & names and "events" in names
        upgrade(engine)
        assert set(inspect(engine).get_table_names()) >= TABLES
    finally:
        engine.dispose()
        databases.drop(url)


@pytest.mark.parametrize(
    ("table", "finer", "bucket", "unit", "before", "after"),
    [
        (quota_change_hours, net_quota_changes, hour_of, 3_600, "0008", "0009"),
        (
            quota_change_days,
            partial(table_rows, table=quota_change_hours),
            day_of,
            86_400,
            "0009",
            "0010",
        ),
    ],
    ids=["0009 hours", "0010 days"],
)
def test_sums_filled_by_the_migration_equal_the_projections(
    databases: TemplateDatabases,
    table: Table,
    finer: Callable[[Connection], list[tuple[Any, ...]]],
    bucket: Callable[[datetime], datetime],
    unit: int,
    before: str,
    after: str,
) -> None:
    """0009 fills quota_change_hours from the change rows already stored, 0010
    quota_change_days from the hours' sums: the same sums the projection writes page by
    page (three hours or days crossed, a late event included), each the sum of the finer
    rows in it. Upgraded to the revision under test only: 0013 empties the quota tables
    for a rebuild."""
    url = databases.clone()
    engine = make_engine(url)
    store = PostgresEventStore(engine)
    try:
        store.append(
            [
                *tree_events(TREE, at(0)),
                submitted("j1", "ws-a", at(100), mgpu=1000),
                occ_started("p1", "j1", "ws-a", at(200), mgpu=1000),
                submitted("j2", "ws-b", at(unit - 100), mgpu=500),
                occ_started("p2", "j2", "ws-b", at(unit + 100), mgpu=500),
                occ_ended("p1", "j1", at(2 * unit + 100)),
                occ_ended("p2", "j2", at(2 * unit + 50)),  # late: stored after a later end
            ]
        )
        Projector(store, [QuotaProjection()], page_size=3).catch_up()
        with engine.connect() as conn:
            projected = table_rows(conn, table)
            parts = finer(conn)
        assert len({row[0] for row in projected}) == 3
        for row in projected:
            inside = [p for p in parts if p[1:3] == row[1:3] and bucket(p[0]) == row[0]]
            assert tuple(sum(p[i] for p in inside) for i in range(3, 8)) == row[3:]
        downgrade(engine, before)
        assert table.name not in inspect(engine).get_table_names()
        upgrade(engine, after)
        with engine.connect() as conn:
            assert table_rows(conn, table) == projected
    finally:
        store.close()
        engine.dispose()
        databases.drop(url)
