"""Term arithmetic: calendar months and years in UTC, and the days a term has been used.

A month term bought on 31 January ends on 28 (or 29) February at the same time of
day: the day of month is clamped, as every billing system that sells calendar terms
does, and the next term starts where the last one ended (so renewals never drift).
"""

from __future__ import annotations

import calendar
from datetime import UTC, datetime, timedelta

from ledger.errors import Invalid
from ledger.events import SubscriptionTermUnit

__all__ = ["DAY", "add_terms", "days_used", "term_end"]

DAY = timedelta(days=1)


def add_terms(start: datetime, unit: SubscriptionTermUnit, count: int = 1) -> datetime:
    """``start`` plus ``count`` calendar months or years, the day of month clamped."""
    if start.tzinfo is None:
        raise Invalid("term instants must be timezone-aware")
    start = start.astimezone(UTC)
    months = count * (12 if unit == "year" else 1)
    index = start.year * 12 + start.month - 1 + months
    year, month = divmod(index, 12)
    month += 1
    day = min(start.day, calendar.monthrange(year, month)[1])
    return start.replace(year=year, month=month, day=day)


def term_end(start: datetime, unit: SubscriptionTermUnit) -> datetime:
    """Where a term of ``unit`` that starts at ``start`` ends."""
    return add_terms(start, unit)


def days_used(start: datetime, at: datetime) -> int:
    """Days of a term used by ``at``: every started day counts (0 before the start)."""
    if at <= start:
        return 0
    seconds = (at - start).total_seconds()
    whole, part = divmod(seconds, 86_400)
    return int(whole) + (1 if part else 0)
