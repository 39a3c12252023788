"""Watchers branch: what the Kubernetes watchers remember between runs.

Revision ID: 0005
Revises: 0001
Create Date: 2026-12-02

``watcher_objects`` holds, per watcher (cluster) and object key (``pod/<uid>``,
``job/<uid>``, ``node/<name>``), the small JSON state the watcher needs to resume
without publishing twice; its resourceVersions live in the event store's
``checkpoints`` table (``watch:<cluster>:<resource>``), written in the same
transaction. Losing this table costs a relist, nothing more (event ids are
deterministic), so it is safe to drop.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0005"
down_revision = "0001"
branch_labels = ("watchers",)
depends_on = None

APP_ROLE = "dlc_ledger_app"


def upgrade() -> None:
    op.create_table(
        "watcher_objects",
        sa.Column("watcher", sa.Text, primary_key=True),
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("state", pg.JSONB, nullable=False),
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON watcher_objects TO {APP_ROLE}")


def downgrade() -> None:
    op.drop_table("watcher_objects")
