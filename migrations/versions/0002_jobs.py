"""Jobs branch: job state and audit timeline, occupancy intervals, cluster inventory.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03

Read models only (projections/jobs.py, projections/inventory/occupancy.py,
projections/inventory/projection.py): dropping them loses nothing, ``dlc-ledger projections
rebuild`` replays them from the event store.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0002"
down_revision = "0001"
branch_labels = ("jobs",)
depends_on = None

APP_ROLE = "dlc_ledger_app"
TABLES = ("job_state", "job_timeline", "occupancy", "inventory_nodes", "job_workspace_quotas")


def upgrade() -> None:
    ts = sa.DateTime(timezone=True)
    op.create_table(
        "job_state",
        sa.Column("job_uid", sa.Text, primary_key=True),
        sa.Column("name", sa.Text),
        sa.Column("namespace", sa.Text),
        sa.Column("kind", sa.Text),
        sa.Column("framework", sa.Text),
        sa.Column("workspace", sa.Text),
        sa.Column("quota", sa.Text),
        sa.Column("user", sa.Text),
        sa.Column("priority", sa.Integer),
        sa.Column("billing_mode", sa.Text),
        sa.Column("replicas", pg.JSONB, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("status_since", ts, nullable=False),
        sa.Column("entered", pg.JSONB, nullable=False),
        sa.Column("submitted_at", ts),
        sa.Column("ended_at", ts),
        sa.Column("deleted_at", ts),
        sa.Column("restarts", sa.Integer, nullable=False),
        sa.Column("preemptions", sa.Integer, nullable=False),
        sa.Column("running_since", ts),
        sa.Column("running_us", sa.BigInteger, nullable=False),
        sa.Column("goodput", sa.Numeric(12, 6)),
        sa.Column("open_occupancies", pg.ARRAY(sa.Text), nullable=False),
        sa.Column("events", sa.Integer, nullable=False),
        sa.Column("last_position", sa.BigInteger, nullable=False),
    )
    op.create_index("job_state_workspace", "job_state", ["workspace", "status"])
    op.create_index("job_state_user", "job_state", ["user"])
    op.create_index("job_state_name", "job_state", ["name"])
    op.create_index("job_state_status", "job_state", ["status"])

    op.create_table(
        "job_timeline",
        sa.Column("job_uid", sa.Text, primary_key=True),
        sa.Column("position", sa.BigInteger, primary_key=True),
        sa.Column("occurred_at", ts, nullable=False),
        sa.Column("type", sa.Text, nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("by", sa.Text),
        sa.Column("reason", sa.Text),
        sa.Column("stream", sa.Text, nullable=False),
        sa.Column("event_id", sa.Uuid, nullable=False),
    )

    op.create_table(
        "occupancy",
        sa.Column("occupancy_id", sa.Text, primary_key=True),
        sa.Column("job_uid", sa.Text, nullable=False),
        sa.Column("pod_uid", sa.Text, nullable=False),
        sa.Column("pod_name", sa.Text),
        sa.Column("node", sa.Text),
        sa.Column("flavor", sa.Text),
        sa.Column("mgpu", sa.BigInteger),
        sa.Column("cpu_milli", sa.BigInteger),
        sa.Column("memory_mib", sa.BigInteger),
        sa.Column("billing_mode", sa.Text),
        sa.Column("workspace", sa.Text),
        sa.Column("quota", sa.Text),
        sa.Column("user", sa.Text),
        sa.Column("started_at", ts),
        sa.Column("ended_at", ts),
        sa.Column("end_reason", sa.Text),
        sa.Column("estimated", sa.Boolean, nullable=False),
        sa.Column("start_position", sa.BigInteger),
        sa.Column("end_position", sa.BigInteger),
        sa.CheckConstraint(
            "started_at IS NULL OR ended_at IS NULL OR ended_at >= started_at",
            name="occupancy_interval_ordered",
        ),
    )
    op.create_index("occupancy_job", "occupancy", ["job_uid"])
    # "what was occupied at T": a GiST range index answers [start, end) @> T directly
    op.execute(
        "CREATE INDEX occupancy_during ON occupancy USING gist "
        "(tstzrange(started_at, ended_at, '[)')) WHERE started_at IS NOT NULL"
    )

    op.create_table(
        "inventory_nodes",
        sa.Column("node", sa.Text, primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("valid_from", ts, nullable=False),
        sa.Column("valid_to", ts),
        sa.Column("pool", sa.Text, nullable=False),
        sa.Column("resource_group", sa.Text, nullable=False),
        sa.Column("flavor", sa.Text, nullable=False),
        sa.Column("gpus", sa.Integer, nullable=False),
        sa.Column("cpu_milli", sa.BigInteger, nullable=False),
        sa.Column("memory_mib", sa.BigInteger, nullable=False),
        sa.Column("billing_mode", sa.Text, nullable=False),
        sa.Column("cordoned", sa.Boolean, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.create_index(
        "inventory_nodes_open",
        "inventory_nodes",
        ["node"],
        postgresql_where=sa.text("valid_to IS NULL"),
    )
    op.create_index("inventory_nodes_from", "inventory_nodes", ["valid_from"])

    # workspace -> quota bindings as folded so far: a job that names no quota belongs to
    # its workspace's quota at submission
    op.create_table(
        "job_workspace_quotas",
        sa.Column("workspace", sa.Text, primary_key=True),
        sa.Column("quota", sa.Text),
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {', '.join(TABLES)} TO {APP_ROLE}")


def downgrade() -> None:
    for table in reversed(TABLES):
        op.drop_table(table)
