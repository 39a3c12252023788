"""The quotas migration branch upgrades, downgrades and upgrades again."""

from __future__ import annotations

from sqlalchemy import inspect

from ledger.store.engines import make_engine
from ledger.store.migrations import downgrade, upgrade
from tests.databases import TemplateDatabases

TABLES = {"quota_nodes", "quota_workspaces", "quota_usage", "quota_usage_history"}


def test_quotas_branch_up_down_up(databases: TemplateDatabases) -> None:
    url = databases.empty()
    engine = make_engine(url)
    try:
        upgrade(engine)
        assert set(inspect(engine).get_table_names()) >= TABLES
        downgrade(engine, "quotas@0001")
        names = set(inspect(engine).get_table_names())
        assert not TABLES & names and "events" in names
        upgrade(engine)
        assert set(inspect(engine).get_table_names()) >= TABLES
    finally:
        engine.dispose()
        databases.drop(url)
