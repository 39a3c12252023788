"""Quotas branch: hourly rollups of the settled quota rows, so a usage series is a range read.

Revision ID: 0021_quota_rollups
Revises: 0013
Create Date: 2026-12-06

A usage series settled the whole quota tree at each point it showed (0.6 s of CPU for 30
days hourly at 10 M events). The projection now keeps the settled rows of every node x
flavor at each hour something changed (``quota_rollup_hours`` / ``quota_rollup_rows``) up
to ``quota_rollup_state.valid_before``; a series reads them and derives only the points
after that. Read models only: empty on upgrade, filled by the projector's next catch-up.
"""

import sqlalchemy as sa
from alembic import op

revision = "0021_quota_rollups"
down_revision = "0013"
branch_labels = None
depends_on = None

APP_ROLE = "dlc_ledger_app"
_TS = sa.DateTime(timezone=True)
_NUMBERS = (
    "min",
    "max",
    "used",
    "borrowed",
    "lent",
    "queued",
    "running_jobs",
    "queued_jobs",
    "over_admitted",
)


def upgrade() -> None:
    op.create_table("quota_rollup_hours", sa.Column("hour", _TS, primary_key=True))
    op.create_table(
        "quota_rollup_rows",
        sa.Column("hour", _TS, primary_key=True),
        sa.Column("quota", sa.Text, primary_key=True),
        sa.Column("flavor", sa.Text, primary_key=True),
        *(sa.Column(n, sa.BigInteger, nullable=False) for n in _NUMBERS),
    )
    op.create_table(
        "quota_rollup_state",
        sa.Column("id", sa.SmallInteger, primary_key=True),
        sa.Column("valid_before", _TS),
        sa.Column("complete", sa.Boolean, nullable=False),
        sa.CheckConstraint("id = 1", name="quota_rollup_state_one_row"),
    )
    for table in ("quota_rollup_hours", "quota_rollup_rows", "quota_rollup_state"):
        op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {APP_ROLE}")


def downgrade() -> None:
    for table in ("quota_rollup_state", "quota_rollup_rows", "quota_rollup_hours"):
        op.drop_table(table)
