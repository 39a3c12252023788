"""Term arithmetic: calendar months and years in UTC, and the days a term has been used.

A month term bought on 31 January ends on 28 (or 29) February at the same time of
day: the day of month is clamped, as every billing system that sells calendar terms
does. Terms are anchored on the purchase: term *n* ends *n* months (years) after the
subscription's start, clamped each time, and the next term starts where the last one
ended; so a subscription bought on the 31st runs 31 Jan -> 28 Feb -> 31 Mar -> 30 Apr
rather than moving to the 28th for good after February (:func:`anchored_end`).
"""

from __future__ import annotations

import calendar
from datetime import UTC, datetime, timedelta

from ledger.errors import Invalid
from ledger.events import SubscriptionTermUnit

__all__ = ["DAY", "add_terms", "anchored_end", "days_used", "term_end"]

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


def anchored_end(anchor: datetime, unit: SubscriptionTermUnit, term: int) -> datetime:
    """Where term number ``term`` (1-based) of a subscription that started at ``anchor``
    ends: ``term`` months (years) after the purchase, the day clamped from the purchase's
    day each time, not from the last term's (which a short month clamped for good)."""
    return add_terms(anchor, unit, term)


def days_used(start: datetime, at: datetime) -> int:
    """Days of a term used by ``at``: every started day counts (0 before the start)."""
    if at <= start:
        return 0
    seconds = (at - start).total_seconds()
    whole, part = divmod(seconds, 86_400)
    return int(whole) + (1 if part else 0)
