"""Virtual time for the simulated cluster.

Trace replays run faster (or slower) than real time, so every timestamp kubesim writes
(creation, binding, termination, graceful-deletion deadlines) comes from this clock
instead of the wall clock; the rest of the system may read it to show replay progress.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

__all__ = ["DEFAULT_EPOCH", "VirtualClock", "format_time", "parse_time"]

DEFAULT_EPOCH = datetime(2026, 11, 1, tzinfo=UTC)


def format_time(moment: datetime) -> str:
    """RFC 3339 with a `Z` and second precision, as the Kubernetes API writes times."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    """Inverse of `format_time` (also accepts `+00:00` offsets and fractions)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


class VirtualClock:
    """A monotonic clock counted in seconds from an epoch; only its owner moves it."""

    def __init__(self, epoch: datetime = DEFAULT_EPOCH, start: float = 0.0) -> None:
        if epoch.tzinfo is None:
            raise ValueError("epoch must be timezone-aware")
        self._epoch = epoch.astimezone(UTC)
        self._seconds = float(start)
        self._lock = threading.Lock()

    @property
    def epoch(self) -> datetime:
        return self._epoch

    def seconds(self) -> float:
        """Virtual seconds elapsed since the epoch (trace seconds)."""
        with self._lock:
            return self._seconds

    def now(self) -> datetime:
        return self._epoch + timedelta(seconds=self.seconds())

    def timestamp(self) -> str:
        return format_time(self.now())

    def at(self, seconds: float) -> datetime:
        """The instant `seconds` after the epoch."""
        return self._epoch + timedelta(seconds=seconds)

    def set(self, seconds: float) -> None:
        """Move to `seconds`; moving backwards is refused (virtual time is monotonic)."""
        with self._lock:
            if seconds < self._seconds:
                raise ValueError(f"virtual clock cannot go back from {self._seconds} to {seconds}")
            self._seconds = float(seconds)

    def advance(self, delta: float) -> None:
        if delta < 0:
            raise ValueError("delta must be >= 0")
        with self._lock:
            self._seconds += delta
