"""Quotas branch: a job's queued and running spans come from its own intervals.

Revision ID: 0013
Revises: 0010
Create Date: 2026-12-05

The fold kept a job's state (queued / running / done) and moved it as the job's events
arrived, stamped with each event's time. A job's events come from two watchers (the
job's and its pods'), so its end can be stored before its start: the job then stayed
queued while its pod ran, and ``report quota-usage --at`` counted running jobs as queued.
A job's row now holds its facts (submission, first end, its pods' intervals) and the
page's changes are its timeline after minus before, whatever the order. Read models
only: the upgrade empties the quota fold's tables and resets the projection's
checkpoint; the projector rebuilds them from the event store.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0013"
down_revision = "0010"
branch_labels = None
depends_on = None

_TABLES = (
    "quota_changes",
    "quota_change_days",
    "quota_change_hours",
    "quota_own_usage",
    "quota_occupancies",
    "quota_jobs",
    "quota_tree_history",
    "quota_workspaces",
    "quota_nodes",
)


def upgrade() -> None:
    op.execute(f"TRUNCATE {', '.join(_TABLES)}")
    op.execute("DELETE FROM checkpoints WHERE name = 'projection:quotas'")
    op.drop_column("quota_jobs", "state")
    op.drop_column("quota_jobs", "changed_at")
    op.add_column("quota_jobs", sa.Column("submitted", sa.Boolean, nullable=False))
    op.add_column("quota_jobs", sa.Column("ended_at", sa.DateTime(timezone=True)))
    op.add_column("quota_jobs", sa.Column("occupied", pg.JSONB, nullable=False))


def downgrade() -> None:
    # the rows stay (the change rows are the same kind of facts); the old fold reads every
    # job back as done, so queued figures of jobs still open need a rebuild to be exact
    op.add_column("quota_jobs", sa.Column("state", sa.Text, nullable=False, server_default="done"))
    op.add_column("quota_jobs", sa.Column("changed_at", sa.DateTime(timezone=True)))
    op.execute("UPDATE quota_jobs SET changed_at = coalesce(ended_at, submitted_at)")
    op.alter_column("quota_jobs", "changed_at", nullable=False)
    op.alter_column("quota_jobs", "state", server_default=None)
    op.drop_column("quota_jobs", "occupied")
    op.drop_column("quota_jobs", "ended_at")
    op.drop_column("quota_jobs", "submitted")
