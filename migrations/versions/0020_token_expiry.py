"""Tokens branch: each API token may expire (``dlc-ledger tokens create --expires-in``).

Revision ID: 0020_token_expiry
Revises: 0016_tokens
Create Date: 2026-12-08

``expires_at`` NULL means the token never expires: what every token created before this
revision keeps (they were made without an expiry; ``tokens list`` shows them as ``never``
and ``tokens revoke`` ends them). A new token gets 90 days unless told otherwise.
"""

import sqlalchemy as sa
from alembic import op

revision = "0020_token_expiry"
down_revision = "0016_tokens"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("api_tokens", sa.Column("expires_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    op.drop_column("api_tokens", "expires_at")
