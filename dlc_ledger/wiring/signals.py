"""Stopping a long-running command cleanly: SIGTERM / SIGINT set a stop event.

The stream processes (``ingest``, ``watch``) loop until an event is set; a signal sets it,
so the batch in hand finishes and the process leaves its consumer group or stores its
checkpoint before it exits. ``up`` runs many parts whose stopping may take seconds: a
second signal there ends the process at once.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

__all__ = ["stop_on_signals"]

log = logging.getLogger(__name__)


def stop_on_signals(stop_event: threading.Event, *, second_exits: bool = False) -> None:
    """SIGTERM / SIGINT: finish the batch in hand, then exit cleanly; with
    ``second_exits``, a second signal exits at once (128 + its number)."""

    def handler(signum: int, _frame: object) -> None:
        if second_exits and stop_event.is_set():
            os._exit(128 + signum)  # asked twice: the parts' threads are not waited for
        log.info("signal %d: stopping after the current batch", signum)
        if second_exits:
            print("stopping (Ctrl-C again to quit at once)", file=sys.stderr, flush=True)
        stop_event.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
