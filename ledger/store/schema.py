"""The one ``MetaData`` of the schema, and the event store's own tables on it.

Every table the migrations create is declared once, on :data:`metadata`: the store's
tables (events, checkpoints, dead letters) here, each read model's in its projection's
module (``projections/jobs/tables.py``, ``occupancy.py``, ``inventory.py``, ``quotas.py``,
``billing_tables.py``) and the watchers' resume state in ``ledger/store/watcher_tables.py``;
``projections.schema`` imports them all for Alembic (``migrations/env.py``). The
migrations in ``migrations/versions`` write the DDL; what Alembic's autogenerate compares
(tables, columns, types, nullability, indexes, unique constraints) must agree with these
declarations, which ``tests/ledger/store/test_schema_drift.py`` checks. Triggers, grants, views
and check constraints live in the migrations only.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Identity,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

__all__ = ["checkpoints", "dead_letters", "events", "metadata"]

metadata = MetaData()

events = Table(
    "events",
    metadata,
    Column("position", BigInteger, primary_key=True, autoincrement=False),
    Column("event_id", Uuid, nullable=False, unique=True),
    Column("stream", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("type", Text, nullable=False),
    Column("schema_version", Integer, nullable=False),
    Column("occurred_at", DateTime(timezone=True), nullable=False),
    Column("observed_at", DateTime(timezone=True), nullable=False),
    Column("recorded_at", DateTime(timezone=True), nullable=False),
    Column("source", Text, nullable=False),
    Column("causation_id", Uuid),
    Column("correlation_id", Uuid),
    Column("data", JSONB, nullable=False),
    Column("hash", LargeBinary, nullable=False),
    # one version per stream: the optimistic-concurrency check of an append
    UniqueConstraint("stream", "version", name="events_stream_version_key"),
    # the few events of one kind (rules, grants, trees, price books) without a scan
    Index("events_type_position", "type", "position"),
)

checkpoints = Table(
    "checkpoints",
    metadata,
    Column("name", Text, primary_key=True),
    Column("position", BigInteger, nullable=False, server_default=text("0")),
    Column("offsets", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

dead_letters = Table(
    "dead_letters",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("fingerprint", LargeBinary, nullable=False, unique=True),
    Column("source", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("error", Text, nullable=False),
    Column("payload", LargeBinary, nullable=False),
    Column("topic", Text),
    Column("partition", Integer),
    Column("offset", BigInteger),
    Column("first_seen", DateTime(timezone=True), nullable=False),
    Column("last_seen", DateTime(timezone=True), nullable=False),
    Column("count", Integer, nullable=False),
    Column("resolved_at", DateTime(timezone=True)),
)
