"""The replay's database: brought up to date or reset, and its own replay topic.

A replay is a dev tool: it may migrate a configured database that is behind, and ``--fresh``
drops the whole schema. The topic is remembered in the database (a checkpoint row), so a reset
database gets a new topic and never ingests a previous run's messages.
"""

from __future__ import annotations

import uuid

from sqlalchemy import select, text

from consumers.kafka_settings import DEFAULT_PARTITIONS
from ledger.store.postgres import PostgresEventStore
from ledger.store.schema import checkpoints

__all__ = ["TOPIC_MARKER", "replay_topic", "reset_database", "upgrade_if_behind"]

TOPIC_MARKER = "replay:topic:"


def upgrade_if_behind(store: PostgresEventStore) -> None:
    """Migrate only when needed, so a replay on a current schema runs as any writer role."""
    from migrations.runner import SchemaNotCurrent, require_current, upgrade

    try:
        require_current(store.engine)
    except SchemaNotCurrent:
        upgrade(store.engine)


def reset_database(store: PostgresEventStore) -> None:
    """Drop and recreate the schema, then migrate: an empty ledger."""
    from migrations.runner import upgrade

    with store.engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    store.engine.dispose()
    upgrade(store.engine)
    store.engine.dispose()


def replay_topic(
    store: PostgresEventStore, bootstrap: str, partitions: int = DEFAULT_PARTITIONS
) -> str:
    """This database's replay topic: remembered in a checkpoint row, created on first use."""
    from consumers.topics import ensure_topic

    with store.engine.connect() as conn:
        name = conn.execute(
            select(checkpoints.c.name).where(
                checkpoints.c.name.startswith(TOPIC_MARKER, autoescape=True)
            )
        ).scalar()
    topic = name[len(TOPIC_MARKER) :] if name else f"dlc.replay-{uuid.uuid4().hex[:12]}"
    ensure_topic(bootstrap, topic, partitions=partitions)
    if not name:
        with store.transaction() as uow:
            uow.save_checkpoint(TOPIC_MARKER + topic, position=0)
    return topic
