"""When to try a failed delivery again, and when to give up.

Exponential backoff with full jitter (AWS's "full jitter": a uniform draw in
``[0, min(cap, base * 2**attempt)]``), the draw seeded by the notification and the attempt
so a restarted sender waits the same; a receiver's ``Retry-After`` (seconds or an HTTP
date) is honoured when it asks for longer. A delivery is given up after
``max_attempts`` attempts or once it is older than ``max_age``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

__all__ = ["RetryPolicy", "retry_after"]


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
        return max(wait, asked) if asked is not None else wait

    def gives_up(self, attempts: int, first_queued: datetime, now: datetime) -> bool:
        return attempts >= self.max_attempts or now - first_queued >= self.max_age


def retry_after(value: str | None, now: datetime) -> timedelta | None:
    """A ``Retry-After`` header as a wait (None when absent or unreadable)."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return timedelta(seconds=int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(timedelta(0), when - now) if when.tzinfo is not None else None
