"""UTC hours and days as the quota tables bucket them: the writes (the projection's sums
per hour and day) and the reads (an instant summed from days, hours, then changes) go
through these same integer functions, so a day holds exactly its 24 hours."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["EPOCH", "day_first_hour", "day_of", "hour_index", "hour_of", "hour_start"]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def hour_index(at: datetime) -> int:
    """Whole hours from the Unix epoch to ``at``, floored (integers: no float rounding)."""
    delta = at - EPOCH
    return (delta.days * 86_400 + delta.seconds) // 3600


def hour_start(index: int) -> datetime:
    """The start of hour ``index`` (counted as :func:`hour_index` counts)."""
    return EPOCH + timedelta(hours=index)


def hour_of(at: datetime) -> datetime:
    """The UTC hour ``at`` falls in (the key of ``quota_change_hours``): the writes and
    the reads both bucket through :func:`hour_index`."""
    return hour_start(hour_index(at))


def day_first_hour(index: int) -> int:
    """The index of the first hour of the UTC day holding hour ``index``."""
    return index // 24 * 24


def day_of(at: datetime) -> datetime:
    """The UTC day ``at`` falls in (the key of ``quota_change_days``): the writes and the
    reads both bucket through :func:`day_first_hour`, so a day holds exactly its 24
    hours' sums."""
    return hour_start(day_first_hour(hour_index(at)))
