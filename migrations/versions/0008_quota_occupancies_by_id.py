"""Quotas branch: the fold loads a pod's quota state by its occupancy id, not by its job.

Revision ID: 0008
Revises: 0006
Create Date: 2026-12-03

Only a pod's own events (OccupancyStarted, OccupancyEnded) read its row, so a page now
takes the rows of the occupancy ids it names. Taking every row of every job a page
named rewrote all of a job's pods, ended ones included, in each page that held any
event of the job: a long job with many restarted pods paid for its whole history every
page. The ``job_uid`` index served only that load and goes; its maintenance went with
every row written. Nothing else changes: no rebuild needed.
"""

from alembic import op

revision = "0008"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("quota_occupancies_job", table_name="quota_occupancies")


def downgrade() -> None:
    op.create_index("quota_occupancies_job", "quota_occupancies", ["job_uid"])
