"""The notifications outbox table (migration ``0019_notifications``, branch ``notifications``).

Not a read model: the event centre's matcher inserts a row for each rule-bearing
``NotificationQueued`` it sees, and the sender moves it to ``delivered`` or ``failed`` in
the same transaction that appends ``NotificationDelivered`` / ``NotificationFailed``, so
the table and the events never disagree; ``attempts``, ``next_attempt_at`` and
``last_error`` are the sender's retry state (docs/notifications.md). Declared here, below
``consumers``, so the schema loads without the HTTP clients the sender uses.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, DateTime, Index, Integer, Table, Text
from sqlalchemy.dialects.postgresql import JSONB

from ledger.store.schema import metadata

__all__ = ["notification_outbox"]

_TS = DateTime(timezone=True)

notification_outbox = Table(
    "notification_outbox",
    metadata,
    Column("notification_id", Text, primary_key=True),
    Column("position", BigInteger, nullable=False),  # of its NotificationQueued
    Column("queued_at", _TS, nullable=False),  # store time of NotificationQueued
    Column("occurred_at", _TS),  # cluster time of the fact
    Column("rule", Text, nullable=False),
    Column("workspace", Text),
    Column("event_type", Text, nullable=False),
    Column("target", Text, nullable=False),
    Column("order_key", Text, nullable=False),
    Column("subject", Text, nullable=False),
    Column("payload", JSONB, nullable=False),
    Column("status", Text, nullable=False),  # queued | delivered | failed
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", _TS),
    Column("last_error", Text),
    Column("finished_at", _TS),
    Column("latency_ms", BigInteger),
    Index("notification_outbox_due", "status", "position"),
    Index("notification_outbox_order", "order_key", "position"),
)
