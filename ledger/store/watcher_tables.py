"""The watchers' resume state table (migration ``0005``, branch ``watchers``).

Not a read model: the Kubernetes watchers (:mod:`consumers.watchers.checkpoints`) keep
their per-object state in it. It is declared here, below ``consumers``, so the schema
(:mod:`projections.schema`, Alembic's ``env.py``) loads without the Kubernetes client.
"""

from __future__ import annotations

from sqlalchemy import Column, Table, Text
from sqlalchemy.dialects.postgresql import JSONB

from ledger.store.schema import metadata

__all__ = ["watcher_objects"]

#: Per watcher (cluster) and object key (``pod/<uid>``, ``job/<uid>``, ``node/<name>``).
watcher_objects = Table(
    "watcher_objects",
    metadata,
    Column("watcher", Text, primary_key=True),
    Column("key", Text, primary_key=True),
    Column("state", JSONB, nullable=False),
)
