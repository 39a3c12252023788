"""Creating the events topic: what a producer, an ingest consumer or a replay needs of a broker."""

from __future__ import annotations

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

from consumers.kafka_settings import DEFAULT_PARTITIONS, DEFAULT_TOPIC

__all__ = ["ensure_topic"]


def ensure_topic(
    bootstrap: str, topic: str = DEFAULT_TOPIC, *, partitions: int = DEFAULT_PARTITIONS
) -> bool:
    """Create ``topic`` with ``partitions`` partitions unless it exists; True if created.

    Tansu supports CreateTopics (replication factor 1) and answers
    TopicAlreadyExists for a second call, which is taken as success. An existing
    topic keeps its partition count.
    """
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="dlc-ledger-admin")
    try:
        if topic in admin.list_topics():
            return False
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)])
        except TopicAlreadyExistsError:
            return False
        return True
    finally:
        admin.close()
