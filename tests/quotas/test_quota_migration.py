"""The quotas migration branch upgrades, downgrades and upgrades again."""

from __future__ import annotations

from sqlalchemy import inspect

from ledger.store.engines import make_engine
from ledger.store.migrations import downgrade, upgrade
from tests.databases import TemplateDatabases

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
