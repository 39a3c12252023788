"""Migrations apply to an empty database, revert, and apply again."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy import inspect

from ledger.store.engines import make_engine
from migrations.runner import current_revision, downgrade, upgrade
from tests.databases import TemplateDatabases


def test_upgrade_downgrade_upgrade(databases: TemplateDatabases) -> None:
    url = databases.empty()
    engine = make_engine(url)
    try:
        upgrade(engine)
        assert {"events", "checkpoints", "dead_letters"} <= set(inspect(engine).get_table_names())
        downgrade(engine, "base")
        assert current_revision(engine) is None
        assert "events" not in inspect(engine).get_table_names()
        upgrade(engine)
        assert "events" in inspect(engine).get_table_names()
        # the immutability trigger came back with the table
        with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
            conn.execute("SELECT 1")
            with pytest.raises(psycopg.Error, match="append-only"):
                conn.execute("TRUNCATE events")
    finally:
        engine.dispose()
        databases.drop(url)
