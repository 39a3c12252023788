"""Event store: append-only hash-chained events, checkpoints, dead letters.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

APP_ROLE = "dlc_ledger_app"


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("position", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("event_id", sa.Uuid, nullable=False),
        sa.Column("stream", sa.Text, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("type", sa.Text, nullable=False),
        sa.Column("schema_version", sa.Integer, nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("observed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("causation_id", sa.Uuid),
        sa.Column("correlation_id", sa.Uuid),
        sa.Column("data", pg.JSONB, nullable=False),
        sa.Column("hash", sa.LargeBinary, nullable=False),
        sa.UniqueConstraint("event_id", name="events_event_id_key"),
        sa.UniqueConstraint("stream", "version", name="events_stream_version_key"),
        sa.CheckConstraint("position > 0 AND version > 0", name="events_positive"),
    )
    op.execute(
        """
        CREATE FUNCTION dlc_refuse_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          RAISE EXCEPTION 'table "%" is append-only: % refused', TG_TABLE_NAME, TG_OP
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'corrections are new events (reversal and re-post), never edits';
        END $$;
        CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
          FOR EACH ROW EXECUTE FUNCTION dlc_refuse_mutation();
        CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
          FOR EACH STATEMENT EXECUTE FUNCTION dlc_refuse_mutation();
        """
    )
    # The application role may read and append, nothing else; production connects as it.
    op.execute(
        f"""
        DO $$ BEGIN
          IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
            CREATE ROLE {APP_ROLE} NOLOGIN;
          END IF;
        END $$;
        REVOKE ALL ON events FROM PUBLIC;
        GRANT SELECT, INSERT ON events TO {APP_ROLE};
        """
    )
    op.create_table(
        "checkpoints",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("position", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("offsets", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "dead_letters",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("fingerprint", sa.LargeBinary, nullable=False, unique=True),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("error", sa.Text, nullable=False),
        sa.Column("payload", sa.LargeBinary, nullable=False),
        sa.Column("topic", sa.Text),
        sa.Column("partition", sa.Integer),
        sa.Column("offset", sa.BigInteger),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("resolved_at", sa.DateTime(timezone=True)),
    )
    op.execute(
        f"GRANT SELECT, INSERT, UPDATE ON checkpoints, dead_letters TO {APP_ROLE};"
    )


def downgrade() -> None:
    op.drop_table("dead_letters")
    op.drop_table("checkpoints")
    op.execute("DROP TRIGGER events_no_truncate ON events")
    op.execute("DROP TRIGGER events_append_only ON events")
    op.drop_table("events")
    op.execute("DROP FUNCTION dlc_refuse_mutation()")
    op.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {APP_ROLE}")
