"""Billing branch: over-settled invoices' excess returned to the credit balance.

Revision ID: 0029_billing_credit_returns
Revises: 0028_billing_locks
Create Date: 2026-12-08

``InvoiceOverSettled`` (an invoice paid and then credited, or voided and re-issued
smaller) moves what its period was settled beyond its total to the workspace's credit
balance: folded into ``billing_credit_returns`` (a credit source the billing tick applies
like an overpayment) and ``billing_invoices.returned_minor`` (the invoice's figures:
open = total - credited - paid - applied + returned).
"""

import sqlalchemy as sa
from alembic import op

revision = "0029_billing_credit_returns"
down_revision = "0028_billing_locks"
branch_labels = None
depends_on = None

APP_ROLE = "dlc_ledger_app"
_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column(
        "billing_invoices",
        sa.Column("returned_minor", sa.BigInteger, nullable=False, server_default=sa.text("0")),
    )
    op.create_table(
        "billing_credit_returns",
        sa.Column("settlement_id", sa.Text, primary_key=True),
        sa.Column("invoice_id", sa.Text, nullable=False),
        sa.Column("workspace", sa.Text, nullable=False),
        sa.Column("amount_minor", sa.BigInteger, nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
        sa.Column("occurred_at", _TS, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.create_index("billing_credit_returns_invoice", "billing_credit_returns", ["invoice_id"])
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON billing_credit_returns TO {APP_ROLE}")


def downgrade() -> None:
    op.drop_table("billing_credit_returns")
    op.drop_column("billing_invoices", "returned_minor")
