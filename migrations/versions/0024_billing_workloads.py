"""Billing branch: services and notebooks, and the quota capacity a spilling service meets.

Revision ID: 0024_billing_workloads
Revises: 0018_billing_quota_groups
Create Date: 2026-12-07

A replica's occupancy names its service (or notebook) as its job; billing folds
``WorkloadCreated`` into ``billing_workloads`` to rate it at its workload's own rates, to
report cost by kind and service, and to know which services spill onto public resources
beyond their quota's capacity, the ``min`` of the quota's spec now kept beside its groups
(docs/workloads.md). Read models: empty (NULL) on upgrade, ``dlc-ledger projections
rebuild billing`` refills them from the store.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0024_billing_workloads"
down_revision = "0018_billing_quota_groups"
branch_labels = None
depends_on = None

APP_ROLE = "dlc_ledger_app"


def upgrade() -> None:
    op.add_column("billing_quota_groups", sa.Column("spec", JSONB))
    op.create_table(
        "billing_workloads",
        sa.Column("job_uid", sa.Text, primary_key=True),
        sa.Column("workload", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("namespace", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("spillover", sa.Text, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON billing_workloads TO {APP_ROLE}")


def downgrade() -> None:
    op.drop_table("billing_workloads")
    op.drop_column("billing_quota_groups", "spec")
