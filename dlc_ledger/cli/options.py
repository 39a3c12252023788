"""What every command's options share: the one instant parser, window and page checks,
and the help words that say which clock an option reads.

Two clocks run through the ledger. **Cluster time** is when a thing happened on the
cluster (Kubernetes timestamps, an event's ``occurred_at``): ``--from``, ``--to``,
``--at``, ``--until`` read it. **Store time** is when the ledger recorded a fact
(``recorded_at``): ``--as-of`` reads it. In a replay the two differ by months.

Every time option goes through :func:`parse_instant`: a bare date is midnight UTC, a
``Z`` or ``+hh:mm`` offset is honoured, and a date-time without an offset is UTC (as
Kubernetes writes its timestamps). Anything else is a one-line ``ValueError``.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from datetime import UTC, date, datetime
from typing import Annotated

import typer

from ledger.errors import Invalid
from projections.pages import MAX_PAGE

__all__ = [
    "AS_OF_HELP",
    "CLUSTER",
    "MAX_PAGE",
    "STORE",
    "CursorOption",
    "EffectiveAtOption",
    "LimitOption",
    "check_window",
    "parse_instant",
    "parse_optional_instant",
    "parse_period",
    "print_next_cursor",
    "require_known",
]

#: Suffixes of option help strings: which clock the option reads.
CLUSTER = "cluster time (Kubernetes timestamps); ISO-8601 (UTC unless an offset) or a date"
STORE = "store time (when the ledger recorded a fact); ISO-8601 (UTC unless an offset) or a date"
AS_OF_HELP = f"only what had been recorded by then: {STORE}"


#: ``--limit`` and ``--cursor`` of every list that pages (:mod:`projections.pages`).
LimitOption = Annotated[
    int, typer.Option("--limit", min=1, max=MAX_PAGE, help=f"Page size (at most {MAX_PAGE:,}).")
]
CursorOption = Annotated[
    str | None,
    typer.Option("--cursor", help="Continue after the page that printed this cursor."),
]

#: ``--effective-at`` of the commands that apply a document (quotas, budgets).
EffectiveAtOption = Annotated[
    str | None,
    typer.Option(
        "--effective-at",
        "--at",
        help=f"When the change takes effect (default now), e.g. a replay's epoch: {CLUSTER}.",
    ),
]


def print_next_cursor(cursor: str | None) -> None:
    """Where a next page starts, on stderr (stdout stays the page's rows)."""
    if cursor is not None:
        typer.echo(f"more: --cursor {cursor}", err=True)


_EXAMPLES = "e.g. 2026-11-01, 2026-11-01T12:00:00Z or 2026-11-01T14:00:00+02:00"
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_PERIOD = re.compile(r"(\d{4})-(\d{2})")


def parse_instant(text: str, *, option: str = "time") -> datetime:
    """``text`` as an aware UTC datetime: a bare date is its midnight UTC, an offset is
    honoured, a date-time without one is UTC. A ``ValueError`` names ``option``."""
    value = text.strip()
    if _DATE.fullmatch(value):
        try:
            day = date.fromisoformat(value)
        except ValueError:
            raise Invalid(f"{option} {text!r} is not a valid date ({_EXAMPLES})") from None
        return datetime(day.year, day.month, day.day, tzinfo=UTC)
    # a date-time needs its 'T' (or a space): "2026" or "20261101" are not instants
    if len(value) < 13 or value[10] not in "T t":
        raise Invalid(f"{option} {text!r} is not a date or ISO-8601 instant ({_EXAMPLES})")
    try:
        parsed = datetime.fromisoformat(value[:-1] + "+00:00" if value[-1] in "Zz" else value)
    except ValueError:
        raise Invalid(
            f"{option} {text!r} is not a date or ISO-8601 instant ({_EXAMPLES})"
        ) from None
    try:
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59:59-01:00 is in year 10000 in UTC
        raise Invalid(f"{option} {text!r} is out of range in UTC") from None


def parse_optional_instant(text: str | None, *, option: str) -> datetime | None:
    """:func:`parse_instant`, passing ``None`` (an option not given) through."""
    return None if text is None else parse_instant(text, option=option)


def check_window(
    start: datetime | None,
    end: datetime | None,
    *,
    names: tuple[str, str] = ("--from", "--to"),
    inclusive: bool = False,
) -> None:
    """A ``ValueError`` unless ``start`` comes before ``end`` (or equals it, if the window
    includes its end): a reversed window is a mistake, never an empty report."""
    if start is None or end is None:
        return
    if end < start or (end == start and not inclusive):
        word = "before" if end < start else "equal to"
        raise Invalid(
            f"{names[1]} {end.isoformat()} is {word} {names[0]} {start.isoformat()}: "
            "the window is empty"
        )


def parse_period(text: str, *, option: str = "--period") -> str:
    """A billing period ``YYYY-MM`` (month 01..12), or a ``ValueError``."""
    match = _PERIOD.fullmatch(text.strip())
    if match is None or not 1 <= int(match.group(2)) <= 12:
        raise Invalid(f"{option} {text!r} is not a period: use YYYY-MM, e.g. 2026-11")
    return match.group(0)


def require_known(what: str, value: str | None, known: Collection[str], *, option: str) -> None:
    """A ``ValueError`` if a filter names ``value`` and it is not among ``known``: an
    unknown name (a typo) is an error, not an empty table. Names up to ten known ones,
    else says how many there are."""
    if value is None or value in known:
        return
    names = sorted(known)
    if not names:
        hint = "none are known yet"
    elif len(names) <= 10:
        hint = f"known: {', '.join(names)}"
    else:
        hint = f"{len(names)} are known, e.g. {', '.join(names[:5])}"
    raise Invalid(f"{option}: no {what} {value!r} ({hint})")
