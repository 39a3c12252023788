"""Tokens branch: API bearer tokens, stored hashed, with their roles (``dlc-ledger tokens``).

Revision ID: 0016_tokens
Revises: 0001
Create Date: 2026-12-05

Not a read model: tokens are access configuration, not facts of the ledger, so they are
not events and a projection rebuild leaves them alone. Only the sha256 of each secret is
stored; a revoked token keeps its row (who had access, until when).
"""

import sqlalchemy as sa
from alembic import op

revision = "0016_tokens"
down_revision = "0001"
branch_labels = ("tokens",)
depends_on = None

APP_ROLE = "dlc_ledger_app"
_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("token_id", sa.Text, primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("secret_sha256", sa.Text, nullable=False, unique=True),
        sa.Column("roles", sa.ARRAY(sa.Text), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("created_by", sa.Text, nullable=False),
        sa.Column("revoked_at", _TS),
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE ON api_tokens TO {APP_ROLE}")


def downgrade() -> None:
    op.drop_table("api_tokens")
