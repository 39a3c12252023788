"""The tables declared in code and the migrated database agree (one schema source).

Alembic's autogenerate compares a database upgraded to every head with
:data:`projections.schema.metadata`: tables, columns, types, nullability, server
defaults, indexes and unique constraints. Triggers, grants, views and check constraints
are not compared (autogenerate does not see them); they live in the migrations only.
"""

from __future__ import annotations

from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Column, MetaData, Table

from ledger.store.engines import make_engine
from projections.registry import all_projections
from projections.schema import metadata


def _differences(url: str, target: MetaData = metadata) -> list[Any]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"compare_type": True, "compare_server_default": True}
            )
            return list(compare_metadata(context, target))
    finally:
        engine.dispose()


def test_migrated_database_matches_the_declared_tables(database_url: str) -> None:
    # database_url is a clone of the session's template: a fresh database upgraded to heads
    diffs = _differences(database_url)
    assert diffs == [], "declared tables and migrations differ:\n" + "\n".join(map(str, diffs))


def test_the_comparison_sees_a_missing_table_column_and_index(database_url: str) -> None:
    # guards the check itself: declarations lacking what the migrations made are reported
    shrunk = MetaData()
    for table in metadata.tables.values():
        if table.name not in ("watcher_objects", "quota_own_usage"):
            table.to_metadata(shrunk)
    own_usage = metadata.tables["quota_own_usage"]
    Table(
        own_usage.name,
        shrunk,
        *(
            Column(c.name, c.type, primary_key=c.primary_key, nullable=c.nullable)
            for c in own_usage.columns
            if c.name != "first_at"
        ),
    )
    job_state = shrunk.tables["job_state"]
    job_state.indexes = {i for i in job_state.indexes if i.name != "job_state_user"}
    found = {(d[0], getattr(d[-1], "name", None)) for d in _differences(database_url, shrunk)}
    assert found == {
        ("remove_table", "watcher_objects"),
        ("remove_column", "first_at"),
        ("remove_index", "job_state_user"),
    }


@pytest.mark.parametrize("projection", all_projections(), ids=lambda p: p.name)
def test_projection_tables_are_the_declared_ones(projection: Any) -> None:
    for table in projection.tables:
        assert metadata.tables[table.name] is table


def test_importing_the_schema_alone_registers_every_table() -> None:
    # Alembic's env.py imports projections.schema and nothing else: a table registered only
    # because some other module happened to be imported first would escape the comparison
    import subprocess
    import sys

    code = "import projections.schema as s\nprint(','.join(sorted(s.metadata.tables)))\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    alone = set(done.stdout.strip().split(","))
    assert alone == set(metadata.tables), set(metadata.tables) ^ alone
    for projection in all_projections():
        assert {t.name for t in projection.tables} <= alone, projection.name
