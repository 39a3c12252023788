"""Stopping a long-running command cleanly: SIGTERM / SIGINT set a stop event.

The stream processes (``ingest``, ``watch``) loop until an event is set; a signal sets it,
so the batch in hand finishes and the process leaves its consumer group or stores its
checkpoint before it exits.
"""

from __future__ import annotations

import logging
import signal
import threading

__all__ = ["stop_on_signals"]

log = logging.getLogger(__name__)


def stop_on_signals(stop_event: threading.Event) -> None:
    """SIGTERM / SIGINT: finish the batch in hand, then exit cleanly."""

    def handler(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping after the current batch", signum)
        stop_event.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
