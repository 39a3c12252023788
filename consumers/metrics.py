"""Prometheus metrics of the Kafka pipeline, and the HTTP endpoint that serves them.

Operators watch ingest throughput, dead letters and lag on a dashboard; the
metric names are stable (``ops/`` dashboards refer to them). Lag is
*approximate*: Tansu answers ``ListOffsets(latest)`` with the base offset of the
last record batch + 1, not the true end of the log, so the gauge can read low
(even zero) while a batch is still unread. Correctness never depends on it.
"""

from __future__ import annotations

import os

from prometheus_client import Counter, Gauge, Histogram, start_http_server

__all__ = [
    "APPEND_SECONDS",
    "BATCHES",
    "DEAD_LETTERS",
    "EVENTS_DUPLICATE",
    "EVENTS_INGESTED",
    "INGEST_LAG",
    "METRICS_HOST_ENV",
    "PRODUCER_SPOOLED",
    "STORE_OUTAGES",
    "serve_metrics",
]

EVENTS_INGESTED = Counter(
    "dlc_ingest_events_total", "Events newly appended to the store by the ingest consumer"
)
EVENTS_DUPLICATE = Counter(
    "dlc_ingest_duplicate_events_total", "Redelivered events the store already held (no-ops)"
)
BATCHES = Counter("dlc_ingest_batches_total", "Poll batches committed to the store")
DEAD_LETTERS = Counter(
    "dlc_ingest_dead_letters_total", "Messages refused into the dead-letter table", ["reason"]
)
APPEND_SECONDS = Histogram(
    "dlc_ingest_store_transaction_seconds",
    "Duration of one batch transaction (append, dead letters, checkpoint, commit)",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
STORE_OUTAGES = Counter(
    "dlc_ingest_store_failures_total", "Batches rolled back because the database failed"
)
INGEST_LAG = Gauge(
    "dlc_ingest_lag_messages",
    "Approximate unread messages per partition (approximate on Tansu: see docs/kafka.md)",
    ["topic", "partition"],
)
PRODUCER_SPOOLED = Gauge(
    "dlc_producer_spooled_events", "Events waiting in the producer's local spool"
)


#: where ``/metrics`` listens unless told: loopback, since it asks for no token. In a
#: Kubernetes pod loopback is unreachable to Prometheus and the kubelet's probes, so the
#: manifests set ``DLC_METRICS_HOST=0.0.0.0`` and a NetworkPolicy says who may connect
#: (ops/kubernetes)
METRICS_HOST_ENV = "DLC_METRICS_HOST"


def serve_metrics(port: int, addr: str | None = None) -> bool:
    """Expose ``/metrics`` on ``port`` (on ``addr``, else ``DLC_METRICS_HOST``, else
    127.0.0.1); ``0`` means off. True if a server was started."""
    if port <= 0:
        return False
    start_http_server(port, addr=addr or os.environ.get(METRICS_HOST_ENV) or "127.0.0.1")
    return True
