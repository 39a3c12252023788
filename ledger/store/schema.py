"""SQLAlchemy Core tables of the event store, mirroring the Alembic migrations.

The migrations in ``migrations/versions`` own the DDL (triggers and grants
included); these definitions exist so queries are built from typed columns
rather than SQL strings.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    Uuid,
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
)

checkpoints = Table(
    "checkpoints",
    metadata,
    Column("name", Text, primary_key=True),
    Column("position", BigInteger, nullable=False),
    Column("offsets", JSONB, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

dead_letters = Table(
    "dead_letters",
    metadata,
    Column("id", BigInteger, primary_key=True),
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
