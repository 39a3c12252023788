"""Jobs branch: a job's own stream is its timeline, read from the event store.

Revision ID: 0007
Revises: 0002
Create Date: 2026-12-03

``job_timeline`` held a copy of every event about a job, nearly all of them events of
the job's own stream ``job/<uid>``, which the store already keeps append-only and
indexed by stream. ``jobs show`` now reads those from the store, and the table keeps
only the events about a job recorded on other streams, so the upgrade deletes the
copies. The downgrade empties the jobs read models and resets their checkpoint: the
projector rebuilds them, copies included.
"""

from alembic import op

revision = "0007"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DELETE FROM job_timeline WHERE stream = 'job/' || job_uid")


def downgrade() -> None:
    op.execute("TRUNCATE job_state, job_timeline, job_workspace_quotas")
    op.execute("DELETE FROM checkpoints WHERE name = 'projection:jobs'")
