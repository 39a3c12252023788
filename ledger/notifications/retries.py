"""When to try a failed delivery again, and when to give up.

Exponential backoff with full jitter (AWS's "full jitter": a uniform draw in
``[0, min(cap, base * 2**attempt)]``), the draw seeded by the notification and the attempt
so a restarted sender waits the same; a receiver's ``Retry-After`` (seconds or an HTTP
date) is honoured when it asks for longer, up to :data:`MAX_RETRY_AFTER` (a receiver's
number is a remote's input: ``Retry-After: 99999999999999`` once overflowed the arithmetic
and stopped the sender). A delivery is given up after ``max_attempts`` attempts or once it
is older than ``max_age``.

Which answers are retried follows Standard Webhooks (:func:`outcome_of`): a 2xx delivers,
``410 Gone`` disables the rule's endpoint, any other 4xx but 408 and 429 fails at once
(the request itself is wrong: sending it again changes nothing), and the rest (5xx, 408,
429, 3xx since redirects are not followed, a connection that failed) is retried.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Literal

__all__ = ["MAX_RETRY_AFTER", "Outcome", "RetryPolicy", "outcome_of", "retry_after"]

#: the longest wait a receiver's ``Retry-After`` can ask for
MAX_RETRY_AFTER = timedelta(hours=1)

Outcome = Literal["delivered", "retry", "fail", "gone"]


def outcome_of(status: int | None) -> Outcome:
    """What an HTTP answer means for the delivery (None: no answer, the connection failed)."""
    if status is None:
        return "retry"
    if 200 <= status < 300:
        return "delivered"
    if status == 410:
        return "gone"
    if 400 <= status < 500 and status not in (408, 429):
        return "fail"
    return "retry"


@dataclass(frozen=True)
class RetryPolicy:
    base: timedelta = timedelta(seconds=2)
    cap: timedelta = timedelta(minutes=10)
    max_attempts: int = 8
    max_age: timedelta = timedelta(hours=24)

    def delay(
        self, notification_id: str, attempt: int, asked: timedelta | None = None
    ) -> timedelta:
        """The wait before attempt ``attempt + 1`` (``attempt`` >= 1 failed so far)."""
        ceiling = min(self.cap, self.base * 2 ** min(attempt - 1, 30))
        digest = hashlib.sha256(f"{notification_id}/{attempt}".encode()).digest()
        share = int.from_bytes(digest[:8], "big") / 2**64
        wait: timedelta = ceiling * share
        return max(wait, min(asked, MAX_RETRY_AFTER)) if asked is not None else wait

    def gives_up(self, attempts: int, first_queued: datetime, now: datetime) -> bool:
        return attempts >= self.max_attempts or now - first_queued >= self.max_age


def retry_after(value: str | None, now: datetime) -> timedelta | None:
    """A ``Retry-After`` header as a wait, at most :data:`MAX_RETRY_AFTER` (None when
    absent or unreadable)."""
    if not value:
        return None
    text = value.strip()[:64]
    if text.isdigit():
        seconds = int(text[:12]) if len(text) <= 12 else int(MAX_RETRY_AFTER.total_seconds())
        return min(timedelta(seconds=seconds), MAX_RETRY_AFTER)
    try:
        when = parsedate_to_datetime(text)
        wait = when - now if when.tzinfo is not None else None
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    return None if wait is None else min(max(timedelta(0), wait), MAX_RETRY_AFTER)
