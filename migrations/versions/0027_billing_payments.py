"""Billing branch: payments, credit applied from overpayments, overdue invoices.

Revision ID: 0027_billing_payments
Revises: 0024_billing_workloads
Create Date: 2026-12-07

``PaymentRecorded`` and ``CreditApplied`` (docs/finance.md, "Payments and receivables")
are folded into ``billing_payments`` and ``billing_credit_applications``; an invoice's
``paid_minor`` (what its payments settled), ``applied_minor`` (the credit applied to it)
and ``overdue_at`` (when ``InvoiceOverdue`` said it was overdue) sit on its row. Read
models: empty (zero, NULL) on upgrade, ``dlc-ledger projections rebuild billing`` refills
them from the store.
"""

import sqlalchemy as sa
from alembic import op

revision = "0027_billing_payments"
down_revision = "0024_billing_workloads"
branch_labels = None
depends_on = None

APP_ROLE = "dlc_ledger_app"
_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column(
        "billing_invoices",
        sa.Column("paid_minor", sa.BigInteger, nullable=False, server_default=sa.text("0")),
    )
    op.add_column(
        "billing_invoices",
        sa.Column("applied_minor", sa.BigInteger, nullable=False, server_default=sa.text("0")),
    )
    op.add_column("billing_invoices", sa.Column("overdue_at", _TS))
    op.create_table(
        "billing_payments",
        sa.Column("payment_id", sa.Text, primary_key=True),
        sa.Column("invoice_id", sa.Text, nullable=False),
        sa.Column("workspace", sa.Text, nullable=False),
        sa.Column("amount_minor", sa.BigInteger, nullable=False),
        sa.Column("applied_minor", sa.BigInteger, nullable=False),
        sa.Column("excess_minor", sa.BigInteger, nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
        sa.Column("reference", sa.Text, nullable=False),
        sa.Column("received_at", _TS, nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("recorded_at", _TS, nullable=False),
    )
    op.create_index("billing_payments_invoice", "billing_payments", ["invoice_id"])
    op.create_index("billing_payments_workspace", "billing_payments", ["workspace", "position"])
    op.create_table(
        "billing_credit_applications",
        sa.Column("application_id", sa.Text, primary_key=True),
        sa.Column("invoice_id", sa.Text, nullable=False),
        sa.Column("from_invoice_id", sa.Text, nullable=False),
        sa.Column("payment_id", sa.Text, nullable=False),
        sa.Column("workspace", sa.Text, nullable=False),
        sa.Column("amount_minor", sa.BigInteger, nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
        sa.Column("occurred_at", _TS, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.create_index(
        "billing_credit_applications_invoice", "billing_credit_applications", ["invoice_id"]
    )
    op.create_index(
        "billing_credit_applications_payment", "billing_credit_applications", ["payment_id"]
    )
    for table in ("billing_payments", "billing_credit_applications"):
        op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {APP_ROLE}")


def downgrade() -> None:
    op.drop_table("billing_credit_applications")
    op.drop_table("billing_payments")
    op.drop_column("billing_invoices", "overdue_at")
    op.drop_column("billing_invoices", "applied_minor")
    op.drop_column("billing_invoices", "paid_minor")
