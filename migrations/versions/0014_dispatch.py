"""Dispatch branch: the dispatcher's latest decision per job.

Revision ID: 0014_dispatch
Revises: 0001
Create Date: 2026-12-05

A read model only (projections/dispatch/decisions.py): dropping it loses nothing,
``dlc-ledger projections rebuild`` replays it from the decision events in the store.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0014_dispatch"
down_revision = "0001"
branch_labels = ("dispatch",)
depends_on = None

APP_ROLE = "dlc_ledger_app"


def upgrade() -> None:
    op.create_table(
        "dispatch_decisions",
        sa.Column("job_uid", sa.Text, primary_key=True),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("outcome", sa.Text, nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("quota", sa.Text),
        sa.Column("preemptor", sa.Text),
        sa.Column("victims", pg.ARRAY(sa.Text), nullable=False),
        sa.Column("pending_count", sa.Integer, nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON dispatch_decisions TO {APP_ROLE}")


def downgrade() -> None:
    op.drop_table("dispatch_decisions")
