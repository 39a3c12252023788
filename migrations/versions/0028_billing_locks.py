"""Billing branch: period locks, the late adjustments the ledger's cost report moves.

Revision ID: 0028_billing_locks
Revises: 0027_billing_payments
Create Date: 2026-12-07

A posting dated into a locked (closed) period is booked into the earliest open one
(docs/finance.md, Period locks); the ledger's cost report moves each such usage
transaction from its usage month to the month that invoiced it. They are few: a partial
index finds them without reading every transaction. (``PeriodClosed`` events are read
from their stream, ``period/closes``: no table.)
"""

from alembic import op

revision = "0028_billing_locks"
down_revision = "0027_billing_payments"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX billing_transactions_late ON billing_transactions (period) "
        "WHERE usage_period IS NOT NULL AND period <> usage_period"
    )


def downgrade() -> None:
    op.drop_index("billing_transactions_late", table_name="billing_transactions")
