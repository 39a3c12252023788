"""The longest window each read may name, in one table: a request asking for more is a
400 naming ``from``/``to`` and the cap, before any read (docs/api.md, "Limits").

What a window costs grows with the steps it is cut into (a series' points, a report's
days), so the cap is by the finest step of the answer. The caps leave room for what a
dashboard asks: 30 days hourly (its hourly series go up to 62), three years daily, and
any window of whole months a finance person would name. A report whose work is cut
finer than its answer is capped by its work: the subscription utilisation report answers
by group or month but weighs every hour (:data:`WEIGHED_HOURLY`, three years). A window
whose side is left out runs to the data's own edge (the first fact, the cluster clock); a
series resolves it first (its edges are one indexed read) and checks the cap on what it
resolved; a report over the data stays bounded by its row cap
(:data:`projections.pages.MAX_REPORT_ROWS`) and the statement timeout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from dlc_ledger.services.errors import InvalidRequest

__all__ = ["SPAN_CAPS", "WEIGHED_HOURLY", "check_span", "finest_step"]

#: the cap of a report whose rows are not cut by time but whose work is per hour
WEIGHED_HOURLY = "weighed-hourly"

#: the longest span of a window, by the finest step its answer is cut into; ``None``:
#: an answer not cut into time steps (a total over the window, a month grouping)
SPAN_CAPS: Mapping[str | None, timedelta] = {
    "hour": timedelta(days=92),  # a quarter hourly: 2,208 points a series
    "day": timedelta(days=1_096),  # three years daily (a leap day included)
    # answered by group or month but weighed hour by hour in Python (the subscription
    # utilisation report): three years is 26,304 hours, about a second of work
    WEIGHED_HOURLY: timedelta(days=1_096),
    None: timedelta(days=36_525),  # a century: cluster history, not a fuzzer's year 1970-2199
}

#: what a request may do instead, by step
_NARROWER = {
    "hour": "narrow from/to or use step=day",
    "day": "narrow from/to or group by month",
    WEIGHED_HOURLY: "narrow from/to (the report weighs every hour of the window)",
    None: "narrow from/to, or leave them out for the whole data",
}


def finest_step(keys: Iterable[str]) -> str | None:
    """The finest time step among a report's group keys (``day``), None without one
    (``month`` is capped as a window without steps: a century is 1,200 of them)."""
    return "day" if "day" in keys else None


def check_span(
    start: datetime | None, end: datetime | None, step: str | None, *, what: str
) -> None:
    """A 400 when ``[start, end]`` spans more than :data:`SPAN_CAPS` allows ``step``
    (nothing to check when a side is open); ``what`` names the read in the message
    (``"a series at step=hour"``)."""
    if start is None or end is None:
        return
    cap = SPAN_CAPS[step]
    span = end - start
    if span > cap:
        raise InvalidRequest(
            f"from/to span {_days(span)}; {what} may span at most {cap.days:,} days: "
            f"{_NARROWER[step]}"
        )


def _days(span: timedelta) -> str:
    whole = span.seconds == span.microseconds == 0
    return f"{span.days:,} days" if whole else f"more than {span.days:,} days"
