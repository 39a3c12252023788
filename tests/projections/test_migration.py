"""The jobs branch migrates up, down (alone) and up again on an empty database."""

from __future__ import annotations

from sqlalchemy import inspect, text

from ledger.store.engines import make_engine
from migrations.runner import downgrade, upgrade
from tests.support.databases import TemplateDatabases

OWNED = {"job_state", "job_timeline", "occupancy", "inventory_nodes"}


def test_jobs_branch_up_down_up(databases: TemplateDatabases) -> None:
    url = databases.empty()
    engine = make_engine(url)
    try:

        def state() -> tuple[set[str], set[str]]:
            with engine.connect() as conn:
                heads = {
                    r[0] for r in conn.execute(text("SELECT version_num FROM alembic_version"))
                }
            return set(inspect(engine).get_table_names()), heads

        upgrade(engine)
        tables, heads = state()
        assert tables >= OWNED and "0011" in heads
        indexes = {i["name"] for i in inspect(engine).get_indexes("occupancy")}
        assert "occupancy_during" in indexes

        downgrade(engine, "jobs@-3")  # 0011, 0007, then 0002
        tables, heads = state()
        assert not OWNED & tables and "events" in tables
        assert not {"0002", "0007", "0011"} & heads

        upgrade(engine)
        tables, heads = state()
        assert tables >= OWNED and "0011" in heads
    finally:
        engine.dispose()
        databases.drop(url)
