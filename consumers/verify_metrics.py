"""The hash chain's last verification as Prometheus gauges, for a one-shot command.

``dlc-ledger verify`` exits when done, so nothing could scrape it: ``--metrics-file``
writes the result in the text format for node_exporter's textfile collector (the
usual home of cron jobs' metrics), atomically (written beside, then renamed). An own
registry keeps the file to these three gauges.
"""

from __future__ import annotations

import time
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

__all__ = ["write_verification"]


def write_verification(path: Path, *, ok: bool, checked: int) -> None:
    """Write the verification's outcome to ``path`` (``ok`` 1 or 0, events checked, when)."""
    registry = CollectorRegistry()
    Gauge(
        "dlc_chain_verification_ok",
        "1 if the last hash-chain verification found the chain intact, else 0",
        registry=registry,
    ).set(1 if ok else 0)
    Gauge(
        "dlc_chain_verified_events",
        "Events the last verification checked (up to the first broken one)",
        registry=registry,
    ).set(checked)
    Gauge(
        "dlc_chain_verification_timestamp_seconds",
        "When the last verification finished",
        registry=registry,
    ).set(time.time())
    write_to_textfile(str(path), registry)
