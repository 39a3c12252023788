"""Logging for the long-running commands (replay, watch, ingest): one setup for all.

kafka-python's IO loop warns about slow tasks ("... blocking the event loop") when the
machine is busy; nothing a user can act on, so those loggers show errors only.
"""

from __future__ import annotations

import logging

__all__ = ["QUIET_LOGGERS", "SERVICE_LOG_FORMAT", "configure_logging"]

#: the services' line format (``api serve``, its worker processes)
SERVICE_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

#: Library loggers whose warnings are noise to a user, and the level they keep.
QUIET_LOGGERS = {"kafka.net.selector": logging.ERROR}


def configure_logging(level: int, fmt: str) -> None:
    """``logging.basicConfig`` plus the quiet library loggers."""
    logging.basicConfig(level=level, format=fmt)
    for name, quiet in QUIET_LOGGERS.items():
        logging.getLogger(name).setLevel(quiet)
