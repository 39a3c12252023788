"""Revenue recognition of a paid term: straight-line, day by day in UTC.

What a term has earned by ``t`` is its amount x the share of the term elapsed, rounded
half-even to the minor unit *cumulatively*, and a day recognises the difference of two
cumulative figures: so the days sum to the amount exactly and the deferred balance of a
term reaches exactly zero at its end, whatever its length or the rounding.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from fractions import Fraction

from ledger.events import SubscriptionTerm

__all__ = ["recognised_by", "recognition_days"]

_MICRO = timedelta(microseconds=1)


def recognised_by(term: SubscriptionTerm, t: datetime) -> int:
    """Minor units of ``term`` earned by instant ``t`` (0 before it starts, all at its end)."""
    if t <= term.starts_at:
        return 0
    if t >= term.ends_at:
        return term.amount_minor
    share = Fraction((t - term.starts_at) // _MICRO, (term.ends_at - term.starts_at) // _MICRO)
    return round(term.amount_minor * share)  # Fraction rounds half to even


def _day_floor(t: datetime) -> datetime:
    t = t.astimezone(UTC)
    return t.replace(hour=0, minute=0, second=0, microsecond=0)


def recognition_days(
    term: SubscriptionTerm, until: datetime
) -> Iterator[tuple[datetime, datetime, int]]:
    """(from, to, minor units) for each UTC day of ``term`` before ``until``, the days
    cut at the term's start and end and at ``until``; days that earn nothing left out.

    ``until`` is where recognition stops for good (the term's end, or a cancellation), so
    a day's bounds, and hence its amount and id, never depend on when a tick ran.
    """
    start = term.starts_at
    stop = min(term.ends_at, until)
    day = _day_floor(start)
    while day < stop:
        lo, hi = max(day, start), min(day + timedelta(days=1), stop)
        amount = recognised_by(term, hi) - recognised_by(term, lo)
        if amount:
            yield lo, hi, amount
        day += timedelta(days=1)
