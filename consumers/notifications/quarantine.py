"""Where the event centre puts what it cannot handle: the dead-letter table.

The matcher reads stored events and rules; one that it cannot turn into a fact or a
notification (a bug, or a rule stored before its bounds existed) must not stop it, or it
would stop on the same item after every restart. It is kept as a dead letter (source
``notifications/matcher``, the item's JSON as payload, the reason and the error) — listed
by ``dead-letters list``, counted again each time it is met — and the rest goes on.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from ledger.store.base import UnitOfWork

__all__ = ["MATCHER_SOURCE", "quarantine"]

MATCHER_SOURCE = "notifications/matcher"

log = logging.getLogger(__name__)


def quarantine(uow: UnitOfWork, reason: str, item: Any, exc: BaseException) -> None:
    """Keep ``item`` as a dead letter with ``reason`` and the error; log it."""
    payload = item.model_dump_json().encode() if hasattr(item, "model_dump_json") else b""
    if not payload:
        payload = orjson.dumps(item, default=str)
    error = f"{type(exc).__name__}: {exc}"
    log.error("notifications: %s: %s", reason, error)
    uow.record_dead_letter(source=MATCHER_SOURCE, reason=reason, error=error, payload=payload)
