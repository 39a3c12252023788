"""Alembic environment: runs migrations on the connection or URL handed in by the CLI.

``target_metadata`` is every table as declared in code (:mod:`projections.schema`), so
``alembic check`` / ``revision --autogenerate`` see what the code expects (server
defaults compared too, as ``tests/ledger/store/test_schema_drift.py`` does).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from projections.schema import metadata as target_metadata

config = context.config
compare = {"target_metadata": target_metadata, "compare_server_default": True}
connection = config.attributes.get("connection")

if connection is not None:
    context.configure(connection=connection, transaction_per_migration=True, **compare)
    with context.begin_transaction():
        context.run_migrations()
else:
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "")
    with engine.begin() as conn:
        context.configure(connection=conn, **compare)
        with context.begin_transaction():
            context.run_migrations()
