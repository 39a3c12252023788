"""Quotas branch: which jobs are services and notebooks, for quota usage split by kind.

Revision ID: 0026_quota_workloads
Revises: 0021_quota_rollups
Create Date: 2026-12-07

A replica's pod names its service (or notebook) as its job; the quota projection folds
``WorkloadCreated`` into this table so a quota's usage splits into training, services and
notebooks (docs/workloads.md). A read model: empty on upgrade, ``dlc-ledger projections
rebuild quotas`` refills it from the store.
"""

import sqlalchemy as sa
from alembic import op

revision = "0026_quota_workloads"
down_revision = "0021_quota_rollups"
branch_labels = None
depends_on = None

APP_ROLE = "dlc_ledger_app"


def upgrade() -> None:
    op.create_table(
        "quota_workloads",
        sa.Column("job_uid", sa.Text, primary_key=True),
        sa.Column("workload", sa.Text, nullable=False),
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON quota_workloads TO {APP_ROLE}")


def downgrade() -> None:
    op.drop_table("quota_workloads")
