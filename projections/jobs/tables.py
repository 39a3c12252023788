"""The jobs read model's tables, on the schema's one ``MetaData``: ``job_state`` (one row
per job uid), ``job_timeline`` (the events about a job recorded on other streams) and
``job_workspace_quotas`` (the workspace bindings a JobSubmitted naming no quota resolves by).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Index,
    Integer,
    Numeric,
    SmallInteger,
    Table,
    Text,
    Uuid,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from ledger.store.schema import metadata

__all__ = ["job_state", "job_timeline", "job_workspace_quotas"]

_TS = DateTime(timezone=True)

job_state = Table(
    "job_state",
    metadata,
    Column("job_uid", Text, primary_key=True),
    Column("name", Text),
    Column("namespace", Text),
    Column("kind", Text),
    Column("framework", Text),
    Column("workspace", Text),
    Column("quota", Text),
    Column("user", Text),
    Column("priority", Integer),
    Column("billing_mode", Text),
    Column("replicas", JSONB, nullable=False),
    Column("status", Text, nullable=False),
    Column("status_since", _TS, nullable=False),
    Column("entered", JSONB, nullable=False),
    Column("submitted_at", _TS),
    Column("ended_at", _TS),
    Column("deleted_at", _TS),
    Column("restarts", Integer, nullable=False),
    Column("preemptions", Integer, nullable=False),
    Column("running_since", _TS),
    Column("running_us", BigInteger, nullable=False),
    Column("goodput", Numeric(12, 6)),
    Column("open_occupancies", ARRAY(Text), nullable=False),
    Column("events", Integer, nullable=False),
    Column("last_position", BigInteger, nullable=False),
    # the latest fact folded, in fold order: a fact that sorts before it re-folds the job
    Column("fold_at", _TS),
    Column("fold_rank", SmallInteger, nullable=False),
    Column("fold_position", BigInteger, nullable=False),
    # every status change as [status, at], in order: the status at any instant
    Column("transitions", JSONB, nullable=False),
    Index("job_state_workspace", "workspace", "status"),
    Index("job_state_user", "user"),
    Index("job_state_name", "name"),
    Index("job_state_status", "status"),
)

job_workspace_quotas = Table(
    "job_workspace_quotas",
    metadata,
    Column("workspace", Text, primary_key=True),
    Column("quota", Text),
)

job_timeline = Table(
    "job_timeline",
    metadata,
    Column("job_uid", Text, primary_key=True),
    Column("position", BigInteger, primary_key=True),
    Column("occurred_at", _TS, nullable=False),
    Column("type", Text, nullable=False),
    Column("summary", Text, nullable=False),
    Column("source", Text, nullable=False),
    Column("by", Text),
    Column("reason", Text),
    Column("stream", Text, nullable=False),
    Column("event_id", Uuid, nullable=False),
)
