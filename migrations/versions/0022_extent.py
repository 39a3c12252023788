"""Extent branch: the span of cluster time per event source (``projections/extent``).

Revision ID: 0022_extent
Revises: 0001
Create Date: 2026-12-07

``/v1/extent`` and the cluster clock (billing's "now", the month-to-date default) were
scans of every event; this read model keeps per source the earliest cluster fact and the
latest instant of a job's or node's stream, so they read a few rows. A read model only:
empty on upgrade, filled by the projector's next catch-up (until then the exact clock
reads the events after its checkpoint, i.e. all of them, as before).
"""

import sqlalchemy as sa
from alembic import op

revision = "0022_extent"
down_revision = "0001"
branch_labels = ("extent",)
depends_on = None

APP_ROLE = "dlc_ledger_app"
_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "extent_sources",
        sa.Column("source", sa.Text, primary_key=True),
        sa.Column("first_at", _TS),
        sa.Column("last_at", _TS),
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON extent_sources TO {APP_ROLE}")


def downgrade() -> None:
    op.drop_table("extent_sources")
