"""What every list route shares: the ``{items, next_cursor}`` body, its query parameters
(``limit``, ``cursor``, ``format``, a window), JSON-ready values, and the paging of a
report computed whole; and :data:`Instant`, the one type of every route's instant query
parameters (``at``, ``from``, ``to``, ``as_of``).

Values: instants as ISO 8601 UTC (``2026-11-01T00:00:00Z``), decimals as strings (no
float rounding), nested values kept. A list read that pages in SQL (jobs, invoices)
passes its own keyset cursor through; a report the read functions compute whole (the
quota tree, a series, waits) is paged here by an opaque cursor holding the rows
already sent, so every list pages the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Annotated, Any

import orjson
from fastapi import Query, Request, Response
from pydantic import AfterValidator, AwareDatetime, BeforeValidator

from dlc_ledger.api.csv_responses import ListFormat, csv_response, wants_csv
from dlc_ledger.api.freshness import with_freshness
from dlc_ledger.services.errors import InvalidRequest
from ledger.canonical import format_timestamp
from ledger.errors import Invalid
from ledger.store.base import Connection
from projections.pages import decode_cursor, encode_cursor

__all__ = [
    "AtQuery",
    "CursorQuery",
    "FromQuery",
    "Instant",
    "LimitQuery",
    "ToQuery",
    "check_window",
    "json_response",
    "listed_report",
    "listing",
    "page_of",
    "plain",
]

LimitQuery = Annotated[int, Query(ge=1, le=1000, description="Page size (1 to 1,000).")]
CursorQuery = Annotated[str | None, Query(description="next_cursor of the previous page (opaque).")]
#: what an instant query parameter must look like: a date, a time and a zone (RFC 3339,
#: with ``T`` or a space); pydantic alone would also take ``0`` or ``1700000000`` as a
#: Unix time, and a naive time would be read in nobody knows which zone
_ISO_INSTANT = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})"
)


def _iso_instant(value: object) -> object:
    if isinstance(value, datetime):  # a caller in Python: the zone is still checked
        return value
    if not isinstance(value, str) or _ISO_INSTANT.fullmatch(value) is None:
        raise Invalid(
            "give an ISO 8601 instant with a time zone, e.g. 2026-11-01T00:00:00Z "
            "(not a Unix time, nor a time without a zone)"
        )
    return value


#: the instants a query may name: cluster and store time lie well inside, and arithmetic on
#: them (an hour's step, a month's end, a zone's offset) never leaves ``datetime``'s range
EARLIEST_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_INSTANT = datetime(2200, 1, 1, tzinfo=UTC)


def _bounded(value: datetime) -> datetime:
    try:
        utc = value.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59:59-01:00 is past year 9999 in UTC
        utc = LATEST_INSTANT
    if not EARLIEST_INSTANT <= utc < LATEST_INSTANT:
        raise Invalid(
            f"give an instant from {EARLIEST_INSTANT:%Y-%m-%d} up to (not including) "
            f"{LATEST_INSTANT:%Y-%m-%d}"
        )
    return value


#: every instant query parameter (``at``, ``from``, ``to``, ``as_of``): ISO 8601 with a
#: zone, within [:data:`EARLIEST_INSTANT`, :data:`LATEST_INSTANT`), else a 422 naming the
#: parameter
Instant = Annotated[AwareDatetime, BeforeValidator(_iso_instant), AfterValidator(_bounded)]
FromQuery = Annotated[
    Instant | None, Query(alias="from", description="Window start (ISO 8601 with zone).")
]
ToQuery = Annotated[
    Instant | None, Query(alias="to", description="Window end (ISO 8601 with zone).")
]
AtQuery = Annotated[
    Instant | None, Query(description="Instant (ISO 8601 with zone); default the latest.")
]


def check_window(start: datetime | None, end: datetime | None) -> None:
    """A 400 for a window (from, to) that ends before it starts."""
    if start is not None and end is not None and end < start:
        raise InvalidRequest("to must not be before from")


#: values JSON takes as they are: checked by exact type first, as nearly every value of a
#: page is one of them (a 2,163-row series spent most of its rendering in ABC checks)
_SCALARS = frozenset({str, int, float, bool, type(None)})


def plain(value: Any) -> Any:
    """``value`` JSON-ready: instants as ISO 8601 UTC, decimals as strings, recursively."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {k if type(k) is str else str(k): plain(v) for k, v in value.items()}
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def page_of(
    rows: Sequence[dict[str, Any]], limit: int, cursor: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of a report computed whole, and the cursor of the next (None: the last)."""
    start = int(decode_cursor(cursor, int)[0]) if cursor is not None else 0
    if start < 0:
        raise InvalidRequest("invalid cursor: pass the one a previous page returned")
    end = start + limit
    return list(rows[start:end]), encode_cursor([end]) if end < len(rows) else None


def listing(
    request: Request,
    items: Sequence[Mapping[str, Any]],
    next_cursor: str | None,
    *,
    name: str,
    fmt: ListFormat | None,
    **extra: Any,
) -> dict[str, Any] | Response:
    """The page as JSON (``extra`` keys first, then items and next_cursor), or as CSV."""
    ready = [plain(item) for item in items]
    if wants_csv(request, fmt):
        return csv_response(request, ready, name=name, next_cursor=next_cursor)
    return json_response(
        with_freshness(request, {**plain(extra), "items": ready, "next_cursor": next_cursor})
    )


def json_response(document: Mapping[str, Any]) -> Response:
    """``document`` (JSON-ready, :func:`plain`) rendered once. A route's ``response_model``
    documents the body; re-validating every row through it cost more CPU than reading
    them (bench/RESULTS.md, api), and the schemathesis tests hold the bodies to it."""
    return Response(orjson.dumps(document), media_type="application/json")


def listed_report(
    request: Request,
    read: Callable[[Connection], Sequence[dict[str, Any]]],
    *,
    name: str,
    limit: int,
    cursor: str | None,
    fmt: ListFormat | None,
    **extra: Any,
) -> dict[str, Any] | Response:
    """The body every route over a report computed whole shares: ``read`` on one snapshot
    of the read models, one page of its rows, the page as JSON or CSV."""
    with request.app.state.store.reading() as conn:
        rows = read(conn)
    items, following = page_of(rows, limit, cursor)
    return listing(request, items, following, name=name, fmt=fmt, **extra)
