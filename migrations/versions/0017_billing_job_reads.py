"""Billing branch: indexes for one job's cost and the cluster clock (``/v1/jobs/{uid}``).

Revision ID: 0017_billing_job_reads
Revises: 0012
Create Date: 2026-12-05

``jobs show`` and ``GET /v1/jobs/{uid}`` rate a job's occupancies to the cluster clock
(``projections.billing.reports.job_cost``): the job's rows of ``billing_occupancies``
were found by a sequential scan (no index on ``job_uid``), and the clock's
``max(ended_at)`` read every row too (only ``started_at`` leads an index). Both grew
with the store: ~1,000,000 occupancies at 10,000,000 events (``python -m bench api``).
"""

from alembic import op

revision = "0017_billing_job_reads"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("billing_occupancies_job", "billing_occupancies", ["job_uid"])
    op.create_index("billing_occupancies_ended", "billing_occupancies", ["ended_at"])


def downgrade() -> None:
    op.drop_index("billing_occupancies_ended", table_name="billing_occupancies")
    op.drop_index("billing_occupancies_job", table_name="billing_occupancies")
