"""Prometheus metrics of the notification sender (``notifications send``): rounds run,
notifications queued by the matcher, delivered, retried and given up.

``dlc_notifications_last_round_timestamp_seconds`` lets an alert see a sender that stopped
going round (``time() - …`` beyond a few intervals); ``dlc_notifications_rounds_total``,
exposed from the start, lets ``absent()`` see that no sender is scraped at all.
"""

from __future__ import annotations

import time

from prometheus_client import Counter, Gauge

__all__ = ["record_round"]

ROUNDS = Counter("dlc_notifications_rounds_total", "Match-and-send rounds run by the sender")
QUEUED = Counter("dlc_notifications_queued_total", "Notifications queued by the matcher")
DELIVERED = Counter("dlc_notifications_delivered_total", "Notifications delivered")
RETRIED = Counter("dlc_notifications_retried_total", "Deliveries failed and to be retried")
FAILED = Counter("dlc_notifications_failed_total", "Notifications given up after their retries")
LAST_ROUND = Gauge(
    "dlc_notifications_last_round_timestamp_seconds", "Wall-clock time the last round finished"
)


def record_round(queued: int, delivered: int, retried: int, failed: int) -> None:
    ROUNDS.inc()
    QUEUED.inc(queued)
    DELIVERED.inc(delivered)
    RETRIED.inc(retried)
    FAILED.inc(failed)
    LAST_ROUND.set(time.time())
