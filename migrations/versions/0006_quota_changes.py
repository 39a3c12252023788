"""Quotas branch: raw usage changes at cluster time replace the stamped change points.

Revision ID: 0006
Revises: 0003
Create Date: 2026-12-02

The change-point tables of 0003 were written in arrival order, which across jobs is
not cluster-time order (Kafka orders per key only), so late events smeared the
history. The projection now stores order-independent raw changes per leaf quota,
stamped with their own cluster time (``quota_changes``), and the tree's changes
(``quota_tree_history``); readers derive every figure (projections/quotas/reads.py).
Read models only: the upgrade empties the quota tables and resets the projection's
checkpoint, and the projector rebuilds them from the event store.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0006"
down_revision = "0003"
branch_labels = None
depends_on = None

APP_ROLE = "dlc_ledger_app"
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
_KEPT = ("quota_nodes", "quota_workspaces", "quota_jobs", "quota_occupancies", "quota_own_usage")


def upgrade() -> None:
    ts = sa.DateTime(timezone=True)
    op.drop_table("quota_usage_history")
    op.drop_table("quota_usage")
    op.drop_table("quota_projection_state")
    op.drop_index("quota_occupancies_started", table_name="quota_occupancies")
    op.execute(f"TRUNCATE {', '.join(_KEPT)}")
    op.execute("DELETE FROM checkpoints WHERE name = 'projection:quotas'")
    op.add_column("quota_jobs", sa.Column("changed_at", ts, nullable=False))
    # a key's first change: usage at an instant late in the history is read as the
    # totals minus the changes after it, and a key first changed later must not show
    op.add_column("quota_own_usage", sa.Column("first_at", ts, nullable=False))
    op.create_table(
        "quota_tree_history",
        sa.Column("at", ts, primary_key=True),
        sa.Column("position", sa.BigInteger, primary_key=True),
        sa.Column("quota_id", sa.Text, primary_key=True),
        sa.Column("spec", pg.JSONB),  # null: deleted
    )
    # one row per event and instant, the flavors' changes in one jsonb (a third of the
    # rows of one per flavor); one index, the primary key, leading with "at" for both the
    # sums up to an instant and a window's changes in time order
    op.create_table(
        "quota_changes",
        sa.Column("at", ts, primary_key=True),
        sa.Column("position", sa.BigInteger, primary_key=True),
        sa.Column("quota", sa.Text, nullable=False),
        sa.Column("changes", pg.JSONB, nullable=False),
    )
    op.execute(
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON quota_tree_history, quota_changes TO {APP_ROLE}"
    )


def downgrade() -> None:
    ts = sa.DateTime(timezone=True)
    op.drop_table("quota_changes")
    op.drop_table("quota_tree_history")
    op.drop_column("quota_jobs", "changed_at")
    op.drop_column("quota_own_usage", "first_at")
    op.execute(f"TRUNCATE {', '.join(_KEPT)}")
    op.execute("DELETE FROM checkpoints WHERE name = 'projection:quotas'")
    op.create_index("quota_occupancies_started", "quota_occupancies", ["started_at"])
    numbers = [sa.Column(name, sa.BigInteger, nullable=False) for name in _NUMBERS]
    op.create_table(
        "quota_usage",
        sa.Column("quota", sa.Text, primary_key=True),
        sa.Column("flavor", sa.Text, primary_key=True),
        sa.Column("at", ts, nullable=False),
        *numbers,
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "quota_usage_history",
        sa.Column("quota", sa.Text, primary_key=True),
        sa.Column("flavor", sa.Text, primary_key=True),
        sa.Column("at", ts, primary_key=True),
        *[sa.Column(name, sa.BigInteger, nullable=False) for name in _NUMBERS],
        sa.Column("deleted", sa.Boolean, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "quota_projection_state",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("watermark", ts),
        sa.Column("instant_position", sa.BigInteger),
        sa.Column("open_deleted", pg.JSONB),
    )
    op.execute(
        "GRANT SELECT, INSERT, UPDATE, DELETE ON quota_usage, quota_usage_history, "
        f"quota_projection_state TO {APP_ROLE}"
    )
