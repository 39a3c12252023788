"""The quotas migration branch upgrades, downgrades and upgrades again."""

from __future__ import annotations

from sqlalchemy import inspect

from consumers.projector import Projector
from ledger.store.engines import make_engine
from ledger.store.migrations import downgrade, upgrade
from ledger.store.postgres import PostgresEventStore
from projections.quotas import QuotaProjection, quota_change_hours
from tests.databases import TemplateDatabases
from tests.projections.tables import table_rows
from tests.quotas.helpers import at, occ_ended, occ_started, submitted, tree_events
from tests.quotas.test_quota_projection import TREE

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


def test_hour_sums_filled_by_the_migration_equal_the_projections(
    databases: TemplateDatabases,
) -> None:
    """0009 fills quota_change_hours from the change rows already stored: the same sums the
    projection writes page by page (hours crossed, a late event included)."""
    url = databases.clone()
    engine = make_engine(url)
    store = PostgresEventStore(engine)
    try:
        store.append(
            [
                *tree_events(TREE, at(0)),
                submitted("j1", "ws-a", at(100), mgpu=1000),
                occ_started("p1", "j1", "ws-a", at(200), mgpu=1000),
                submitted("j2", "ws-b", at(3_500), mgpu=500),
                occ_started("p2", "j2", "ws-b", at(3_700), mgpu=500),
                occ_ended("p1", "j1", at(7_300)),
                occ_ended("p2", "j2", at(3_650)),  # late: before its start, clamped to it
            ]
        )
        Projector(store, [QuotaProjection()], page_size=3).catch_up()
        with engine.connect() as conn:
            projected = table_rows(conn, quota_change_hours)
        assert len({row[0] for row in projected}) == 3  # three hours
        downgrade(engine, "0008")
        assert "quota_change_hours" not in inspect(engine).get_table_names()
        upgrade(engine)
        with engine.connect() as conn:
            assert table_rows(conn, quota_change_hours) == projected
    finally:
        store.close()
        engine.dispose()
        databases.drop(url)
