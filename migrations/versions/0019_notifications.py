"""Notifications branch: the event centre's outbox (``dlc-ledger notifications``).

Revision ID: 0019_notifications
Revises: 0001
Create Date: 2026-12-06

Rules, queued notifications and deliveries are events; this table is the outbox the
sender works from (``ledger/store/notification_tables.py``), written in the same
transactions as those events.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0019_notifications"
down_revision = "0001"
branch_labels = ("notifications",)
depends_on = None

APP_ROLE = "dlc_ledger_app"
_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "notification_outbox",
        sa.Column("notification_id", sa.Text, primary_key=True),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("queued_at", _TS, nullable=False),
        sa.Column("occurred_at", _TS),
        sa.Column("rule", sa.Text, nullable=False),
        sa.Column("workspace", sa.Text),
        sa.Column("event_type", sa.Text, nullable=False),
        sa.Column("target", sa.Text, nullable=False),
        sa.Column("order_key", sa.Text, nullable=False),
        sa.Column("subject", sa.Text, nullable=False),
        sa.Column("payload", JSONB, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", _TS),
        sa.Column("last_error", sa.Text),
        sa.Column("finished_at", _TS),
        sa.Column("latency_ms", sa.BigInteger),
    )
    op.create_index("notification_outbox_due", "notification_outbox", ["status", "position"])
    op.create_index("notification_outbox_order", "notification_outbox", ["order_key", "position"])
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON notification_outbox TO {APP_ROLE}")


def downgrade() -> None:
    op.drop_table("notification_outbox")
