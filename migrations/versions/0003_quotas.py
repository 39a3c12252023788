"""Quotas branch: the quota tree, workspace bindings and quota usage over time.

Revision ID: 0003
Revises: 0001
Create Date: 2026-12-02

Read models only (projections/quotas/projection.py): dropping them loses nothing, a rebuild
replays them from the event store.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0003"
down_revision = "0001"
branch_labels = ("quotas",)
depends_on = None

APP_ROLE = "dlc_ledger_app"
TABLES = (
    "quota_nodes",
    "quota_workspaces",
    "quota_jobs",
    "quota_occupancies",
    "quota_own_usage",
    "quota_usage",
    "quota_usage_history",
    "quota_projection_state",
)

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


def _numbers() -> list[sa.Column]:
    return [sa.Column(name, sa.BigInteger, nullable=False) for name in _NUMBERS]


def upgrade() -> None:
    ts = sa.DateTime(timezone=True)
    op.create_table(
        "quota_nodes",
        sa.Column("quota_id", sa.Text, primary_key=True),
        sa.Column("parent", sa.Text),
        sa.Column("spec", pg.JSONB, nullable=False),
        sa.Column("created_at", ts, nullable=False),
        sa.Column("changed_at", ts, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "quota_workspaces",
        sa.Column("workspace", sa.Text, primary_key=True),
        sa.Column("quota", sa.Text, nullable=False),
        sa.Column("bound_at", ts, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "quota_jobs",
        sa.Column("job_uid", sa.Text, primary_key=True),
        sa.Column("workspace", sa.Text),
        sa.Column("quota", sa.Text, nullable=False),
        sa.Column("billing_mode", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("requested", pg.JSONB, nullable=False),
        sa.Column("submitted_at", ts, nullable=False),
    )
    op.create_table(
        "quota_occupancies",
        sa.Column("occupancy_id", sa.Text, primary_key=True),
        sa.Column("job_uid", sa.Text, nullable=False),
        sa.Column("quota", sa.Text, nullable=False),
        sa.Column("idle", sa.Boolean, nullable=False),
        sa.Column("resources", pg.JSONB, nullable=False),
        sa.Column("open", sa.Boolean, nullable=False),
        # the pod's own interval: `report quota-usage --at` sums what was open at an
        # instant from these, whatever order the events arrived in
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("ended_at", sa.DateTime(timezone=True)),
    )
    op.create_index("quota_occupancies_job", "quota_occupancies", ["job_uid"])
    op.create_index("quota_occupancies_started", "quota_occupancies", ["started_at"])
    op.create_table(
        "quota_own_usage",
        sa.Column("quota", sa.Text, primary_key=True),
        sa.Column("flavor", sa.Text, primary_key=True),
        sa.Column("used", sa.BigInteger, nullable=False),
        sa.Column("idle_used", sa.BigInteger, nullable=False),
        sa.Column("queued", sa.BigInteger, nullable=False),
        sa.Column("running_jobs", sa.BigInteger, nullable=False),
        sa.Column("queued_jobs", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "quota_usage",
        sa.Column("quota", sa.Text, primary_key=True),
        sa.Column("flavor", sa.Text, primary_key=True),
        sa.Column("at", ts, nullable=False),
        *_numbers(),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "quota_usage_history",
        sa.Column("quota", sa.Text, primary_key=True),
        sa.Column("flavor", sa.Text, primary_key=True),
        sa.Column("at", ts, primary_key=True),
        *_numbers(),
        sa.Column("deleted", sa.Boolean, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    # no index on "at" alone: every query names the quota and flavor (primary key), and
    # a second index doubles the cost of writing the change points
    op.create_table(
        "quota_projection_state",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("watermark", ts),
        sa.Column("instant_position", sa.BigInteger),
        sa.Column("open_deleted", pg.JSONB),
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {', '.join(TABLES)} TO {APP_ROLE}")


def downgrade() -> None:
    for table in reversed(TABLES):
        op.drop_table(table)
