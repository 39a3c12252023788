"""Billing branch: which quotas draw on subscribed resource groups (docs/subscriptions.md).

Revision ID: 0018_billing_quota_groups
Revises: 0017_billing_job_reads
Create Date: 2026-12-06

An occupancy of a quota that draws on resource groups (its own or an ancestor's) runs on
prepaid capacity and is rated in billing mode ``quota``; the billing projection folds
the quota events into this table to know it at each occupancy's start. A read model:
``dlc-ledger projections rebuild billing`` refills it from the store.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0018_billing_quota_groups"
down_revision = "0017_billing_job_reads"
branch_labels = None
depends_on = None

APP_ROLE = "dlc_ledger_app"


def upgrade() -> None:
    op.create_table(
        "billing_quota_groups",
        sa.Column("quota", sa.Text, primary_key=True),
        sa.Column("parent", sa.Text),
        sa.Column("resource_groups", JSONB, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON billing_quota_groups TO {APP_ROLE}")


def downgrade() -> None:
    op.drop_table("billing_quota_groups")
