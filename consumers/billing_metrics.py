"""Prometheus metrics of the billing scheduler (``billing serve``): ticks, transactions
posted, occupancies dead-lettered as unrateable, invoices issued.

``dlc_billing_last_tick_timestamp_seconds`` lets an alert see a scheduler that stopped
ticking (``time() - …`` beyond a few intervals).
"""

from __future__ import annotations

import time

from prometheus_client import Counter, Gauge

__all__ = ["INVOICES", "LAST_TICK", "POSTED", "TICKS", "UNRATEABLE", "record_tick"]

TICKS = Counter("dlc_billing_ticks_total", "Billing scheduler ticks run")
POSTED = Counter("dlc_billing_transactions_total", "Rated transactions appended to the store")
UNRATEABLE = Counter(
    "dlc_billing_unrateable_total", "Occupancies dead-lettered: no applicable rate"
)
INVOICES = Counter("dlc_billing_invoices_total", "Invoices issued by the scheduler")
LAST_TICK = Gauge(
    "dlc_billing_last_tick_timestamp_seconds", "Wall-clock time the last tick finished"
)


def record_tick(posted: int, unrateable: int, invoices: int) -> None:
    TICKS.inc()
    POSTED.inc(posted)
    UNRATEABLE.inc(unrateable)
    INVOICES.inc(invoices)
    LAST_TICK.set(time.time())
