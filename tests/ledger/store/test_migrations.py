"""Migrations apply to an empty database, revert, and apply again."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy import inspect

from ledger.store.engines import make_engine
from migrations.runner import (
    HEADS,
    SchemaNotCurrent,
    current_revision,
    downgrade,
    require_current,
    schema_branches,
    upgrade,
)
from tests.support.databases import TemplateDatabases


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


def test_the_heads_every_command_checks_against_are_alembics(databases: TemplateDatabases) -> None:
    # require_current compares alembic_version with HEADS (one query, no Alembic import);
    # a new migration must update HEADS, else every command would ask Alembic (slower)
    url = databases.empty()
    engine = make_engine(url)
    try:
        with pytest.raises(SchemaNotCurrent):
            require_current(engine)  # never migrated: refused, naming db upgrade
        upgrade(engine)
        assert {b.newest for b in schema_branches(engine)} == HEADS
        assert set(current_revision(engine).split(",")) == HEADS  # type: ignore[union-attr]
        require_current(engine)
        downgrade(engine, "billing@-1")  # one branch behind: the full check names it
        with pytest.raises(SchemaNotCurrent, match="behind"):
            require_current(engine)
    finally:
        engine.dispose()
        databases.drop(url)
