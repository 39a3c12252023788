"""Quotas branch: the raw usage changes summed per UTC day, quota and flavor.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03

With the hours' sums alone, usage at an instant summed every hour on the nearer side of
it: mid-way through a year of history ~4,400 rows per quota and flavor. With the days'
sums it is the days on that side, at most a day of hours and at most an hour of change
rows. The upgrade fills the table from the hours' sums already stored (a day is the sum
of its 24 UTC hours), so no rebuild is needed.
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

APP_ROLE = "dlc_ledger_app"
_RAW = ("used", "idle_used", "queued", "running_jobs", "queued_jobs")


def upgrade() -> None:
    op.create_table(
        "quota_change_days",
        sa.Column("day", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("quota", sa.Text, primary_key=True),
        sa.Column("flavor", sa.Text, primary_key=True),
        *(sa.Column(n, sa.BigInteger, nullable=False) for n in _RAW),
    )
    op.execute(
        f"INSERT INTO quota_change_days (day, quota, flavor, {', '.join(_RAW)}) "
        f"SELECT date_trunc('day', hour, 'UTC'), quota, flavor, "
        f"{', '.join(f'sum({n})' for n in _RAW)} "
        "FROM quota_change_hours GROUP BY 1, 2, 3"
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON quota_change_days TO {APP_ROLE}")


def downgrade() -> None:
    op.drop_table("quota_change_days")
