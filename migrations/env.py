"""Alembic environment: runs migrations on the connection or URL handed in by the CLI.

``target_metadata`` is every table as declared in code (:mod:`projections.schema`), so
``alembic revision --autogenerate`` and ``compare_metadata`` see what the code expects.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from projections.schema import metadata as target_metadata

config = context.config
connection = config.attributes.get("connection")

if connection is not None:
    context.configure(
        connection=connection, target_metadata=target_metadata, transaction_per_migration=True
    )
    with context.begin_transaction():
        context.run_migrations()
else:
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "")
    with engine.begin() as conn:
        context.configure(connection=conn, target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()
