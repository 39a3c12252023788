"""Jobs branch: a job's state folds its facts in cluster-time order.

Revision ID: 0011
Revises: 0007
Create Date: 2026-12-05

``job_state`` followed the order facts were stored in, so a job whose end was stored
before its start showed no running time. The fold now orders a job's facts by cluster
time (then lifecycle rank, then position) and re-folds a job when a fact arrives that
sorts before the latest one folded: ``fold_at`` / ``fold_rank`` / ``fold_position`` hold
that latest fact, ``transitions`` every status change (the status at any instant).
Rows folded the old way are wrong, so the upgrade empties the jobs read models and
resets their checkpoint: the projector rebuilds them from the store.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0011"
down_revision = "0007"
branch_labels = None
depends_on = None


def _reset() -> None:
    op.execute("TRUNCATE job_state, job_timeline, job_workspace_quotas")
    op.execute("DELETE FROM checkpoints WHERE name = 'projection:jobs'")


def upgrade() -> None:
    _reset()
    op.add_column("job_state", sa.Column("fold_at", sa.DateTime(timezone=True)))
    op.add_column("job_state", sa.Column("fold_rank", sa.SmallInteger, nullable=False))
    op.add_column("job_state", sa.Column("fold_position", sa.BigInteger, nullable=False))
    op.add_column("job_state", sa.Column("transitions", JSONB, nullable=False))


def downgrade() -> None:
    _reset()
    for column in ("transitions", "fold_position", "fold_rank", "fold_at"):
        op.drop_column("job_state", column)
