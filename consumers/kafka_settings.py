"""Kafka names and client settings shared by the broker, the producer and the ingest consumer.

One place holds the topic name, the message key rule of ``docs/wire-format.md``
and the client settings that were measured to behave on Tansu (DESIGN §2), so
the producer, the consumer, the tests and the bench cannot drift apart.
"""

from __future__ import annotations

from typing import Any, Final

from ledger.envelopes import MAX_EVENT_BYTES, Envelope

__all__ = [
    "DEFAULT_GROUP",
    "DEFAULT_PARTITIONS",
    "DEFAULT_TOPIC",
    "checkpoint_name",
    "consumer_config",
    "message_key",
    "offsets_key",
    "producer_config",
]

DEFAULT_TOPIC: Final = "dlc.cluster-events"
DEFAULT_PARTITIONS: Final = 4
DEFAULT_GROUP: Final = "dlc-ledger-ingest"


def message_key(envelope: Envelope) -> bytes:
    """The Kafka key: the part of ``stream`` after the first ``/`` (job uid, node name, ...).

    Equal keys land on one partition, so every stream keeps its order end to end.
    """
    return envelope.stream.split("/", 1)[1].encode()


def offsets_key(topic: str, partition: int) -> str:
    """Key of a partition in a stored checkpoint: ``"topic:partition"``."""
    return f"{topic}:{partition}"


def checkpoint_name(group: str) -> str:
    """Name of the ingest consumer's checkpoint row for a consumer group."""
    return f"ingest:{group}"


def producer_config(**overrides: Any) -> dict[str, Any]:
    """kafka-python producer settings: durable (acks=all), ordered, bounded retries.

    ``max_in_flight_requests_per_connection=1`` keeps a retried batch from
    overtaking the next one (per-stream order); idempotence stays on where the
    broker supports it. Failures surface within ``delivery_timeout_ms`` so the
    publisher can spool instead of blocking for minutes.
    """
    config: dict[str, Any] = {
        "acks": "all",
        "retries": 5,
        "retry_backoff_ms": 200,
        "max_in_flight_requests_per_connection": 1,
        "linger_ms": 5,
        "batch_size": 256 * 1024,
        "max_request_size": MAX_EVENT_BYTES + 64 * 1024,
        "request_timeout_ms": 5_000,
        "delivery_timeout_ms": 15_000,
        "max_block_ms": 5_000,
        "reconnect_backoff_max_ms": 2_000,
        "bootstrap_timeout_ms": 3_000,
        "metrics_enabled": False,
    }
    config.update(overrides)
    return config


def consumer_config(**overrides: Any) -> dict[str, Any]:
    """kafka-python consumer settings that join a group in ~3 s on Tansu.

    With kafka-python's defaults a group takes ~23 s to form on Tansu; a 6 s
    session, 1 s heartbeats and a short poll interval bring that to ~3 s.
    Offsets are committed by hand, after the database commit (the database is
    the source of truth; Kafka's committed offset is only a hint for lag tools).
    CRCs are not re-checked in pure Python (TCP and the broker already do) and
    kafka-python's own metrics are off: both cost CPU per record on the hot path.
    """
    config: dict[str, Any] = {
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": 6_000,
        "heartbeat_interval_ms": 1_000,
        "max_poll_interval_ms": 60_000,
        "max_poll_records": 2_000,
        "fetch_max_bytes": 32 * 1024 * 1024,
        "max_partition_fetch_bytes": 8 * 1024 * 1024,
        "fetch_max_wait_ms": 200,
        "check_crcs": False,
        "request_timeout_ms": 30_000,
        "reconnect_backoff_max_ms": 2_000,
        "metrics_enabled": False,
    }
    config.update(overrides)
    return config
