"""Budgets branch: budget changes and crossings per workspace (``dlc-ledger budgets``).

Revision ID: 0015_budgets
Revises: 0001
Create Date: 2026-12-05

Read models only (projections/budgets/projection.py): dropping them loses nothing,
``dlc-ledger projections rebuild`` replays them from the budget events in the store.
"""

import sqlalchemy as sa
from alembic import op

revision = "0015_budgets"
down_revision = "0001"
branch_labels = ("budgets",)
depends_on = None

APP_ROLE = "dlc_ledger_app"
_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "budget_changes",
        sa.Column("position", sa.BigInteger, primary_key=True),
        sa.Column("event_id", sa.Uuid, nullable=False),
        sa.Column("workspace", sa.Text, nullable=False),
        sa.Column("occurred_at", _TS, nullable=False),
        sa.Column("removed", sa.Boolean, nullable=False),
        sa.Column("amount_minor", sa.BigInteger),
        sa.Column("currency", sa.Text),
        sa.Column("scale", sa.SmallInteger),
        sa.Column("period", sa.Text),
        sa.Column("action", sa.Text),
    )
    op.create_index("budget_changes_workspace", "budget_changes", ["workspace", "occurred_at"])
    op.create_table(
        "budget_exceedances",
        sa.Column("event_id", sa.Uuid, primary_key=True),
        sa.Column("workspace", sa.Text, nullable=False),
        sa.Column("period", sa.Text, nullable=False),
        sa.Column("budget_event_id", sa.Text),
        sa.Column("budget_minor", sa.BigInteger, nullable=False),
        sa.Column("spent_minor", sa.BigInteger, nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
        sa.Column("action", sa.Text),
        sa.Column("occurred_at", _TS, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.create_index("budget_exceedances_period", "budget_exceedances", ["period", "workspace"])
    op.execute(
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON budget_changes, budget_exceedances TO {APP_ROLE}"
    )


def downgrade() -> None:
    op.drop_table("budget_exceedances")
    op.drop_table("budget_changes")
