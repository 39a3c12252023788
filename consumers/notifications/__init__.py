"""The event centre's long-running component: match stored facts against the rules and
send what is due (``dlc-ledger notifications send``; docs/notifications.md).

:mod:`.facts` turns stored events into facts, :mod:`.timed` finds the time-based ones,
:mod:`.matcher` queues a notification per rule x fact and fills the outbox,
:mod:`.transports` delivers one (a signed webhook, an apprise URL), :mod:`.sender` works
the outbox with retries. :func:`step` is one round of both.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from consumers.notifications import metrics
from consumers.notifications.matcher import MATCHER_CHECKPOINT, MatchResult, match
from consumers.notifications.sender import SendResult, send_due
from consumers.notifications.transports import Attempt, Message, deliver
from ledger.errors import Unavailable
from ledger.notifications import AllowList, RetryPolicy
from ledger.store.base import EventStore
from ledger.store.failures import as_ledger_error

log = logging.getLogger(__name__)

__all__ = [
    "MATCHER_CHECKPOINT",
    "Attempt",
    "MatchResult",
    "Message",
    "SendResult",
    "deliver",
    "send_due",
    "serve",
    "step",
]


def step(
    store: EventStore,
    cluster_now: datetime,
    *,
    policy: RetryPolicy | None = None,
    wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    allow: AllowList | None = None,
) -> tuple[MatchResult, SendResult]:
    """Match what was stored since the last step (time-based facts at ``cluster_now``),
    then send every notification due on the ``wall`` clock (``allow``: the operator's
    allow-list of webhook targets inside its network; default ``DLC_WEBHOOK_ALLOW``)."""
    with store.transaction() as uow:
        matched = match(uow, cluster_now)
    return matched, send_due(store, now=wall, policy=policy, allow=allow)


def serve(
    store: EventStore,
    stop: threading.Event,
    cluster_clock: Callable[[], datetime],
    *,
    interval: float = 1.0,
    on_step: Callable[[MatchResult, SendResult], None] | None = None,
    allow: AllowList | None = None,
) -> None:
    """:func:`step` every ``interval`` seconds until ``stop`` is set. A database outage
    (the server restarting, a connection terminated) loses nothing — the outbox and the
    checkpoint are where the last commit left them — so it is logged and the step tried
    again after ``interval``. What one tenant's data can break is isolated item by item
    (the matcher quarantines, the sender fails that notification), so any other error is
    a bug and stops the component."""
    while not stop.is_set():
        try:
            matched, sent = step(store, cluster_clock(), allow=allow)
        except Exception as exc:
            if not isinstance(as_ledger_error(exc), Unavailable):
                raise
            log.warning("notifications: the database is unavailable, retrying: %s", exc)
            stop.wait(interval)
            continue
        metrics.record_round(
            matched.queued, len(sent.delivered), len(sent.retried), len(sent.failed)
        )
        if on_step is not None:
            on_step(matched, sent)
        stop.wait(0 if sent.attempted else interval)
