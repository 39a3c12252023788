"""CSV for every list and table route: ``?format=csv`` or ``Accept: text/csv``.

``format`` wins over ``Accept``; an ``Accept`` header is read as RFC 9110 says (media
types in any case, ``q`` weights, the most specific range deciding), CSV only when it
weighs more than JSON (docs/api.md "Headers and negotiation").

One implementation for all of them (stdlib :mod:`csv`): the header row is the items'
keys in the order they first appear, one row per item; a nested value (a dict or a
list, say a queued job's ``request``) is JSON in its cell, ``null`` an empty cell, and a
text that could start a spreadsheet formula gets a leading ``'``
(:func:`dlc_ledger.presenters.neutralized`, the CLI's rule too).
The file is an attachment named for the route; a page continues through a ``Link:
<…&cursor=X>; rel="next"`` header, as the JSON body's ``next_cursor`` does: under the
configured public URL, or relative, never from the ``Host`` header.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Query, Request, Response

from dlc_ledger.presenters import neutralized

__all__ = [
    "CSV_MEDIA",
    "CSV_RESPONSES",
    "FormatQuery",
    "ListFormat",
    "csv_response",
    "csv_text",
    "next_page_url",
    "prefers_csv",
    "wants_csv",
]

CSV_MEDIA = "text/csv"

#: the ``responses=`` of a route that can answer CSV, so the OpenAPI document says so
CSV_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The items (JSON), or with ?format=csv / Accept: text/csv a CSV file.",
        "content": {CSV_MEDIA: {"schema": {"type": "string"}}},
    }
}


class ListFormat(StrEnum):
    json = "json"
    csv = "csv"


FormatQuery = Annotated[
    ListFormat | None,
    Query(
        alias="format",
        description="csv: the items as a CSV file (as does Accept: text/csv); default json.",
    ),
]


def wants_csv(request: Request, fmt: ListFormat | None) -> bool:
    """CSV when asked by ``format``, else when the ``Accept`` header prefers text/csv."""
    if fmt is not None:
        return fmt is ListFormat.csv
    return prefers_csv(request.headers.get("accept", ""))


#: the media ranges that cover each answer, most specific first (RFC 9110 §12.5.1); ``*/*``
#: is JSON's only: a client that takes anything gets the default
_RANGES = {"json": ("application/json", "application/*", "*/*"), "csv": (CSV_MEDIA, "text/*")}


def _weights(accept: str) -> dict[str, float]:
    """Each media range of an ``Accept`` value (lower case) and its weight: the highest
    ``q`` it is listed with (1 without one); a range with a malformed ``q`` is left out."""
    weights: dict[str, float] = {}
    for part in accept.split(","):
        media, *params = (piece.strip() for piece in part.split(";"))
        media = media.lower()
        if not media:
            continue
        weight = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    weight = float(value.strip())
                except ValueError:
                    weight = -1.0
        if 0 <= weight <= 1:
            weights[media] = max(weight, weights.get(media, 0.0))
    return weights


def _quality(weights: dict[str, float], ranges: tuple[str, ...]) -> float:
    # the most specific range listed decides: "text/csv;q=0, text/*" refuses CSV
    return next((weights[r] for r in ranges if r in weights), 0.0)


def prefers_csv(accept: str) -> bool:
    """Whether an ``Accept`` header value asks for CSV rather than JSON: media types in
    any case, the higher ``q`` wins (``q=0``: not at all), a tie is JSON's (the default)."""
    weights = _weights(accept)
    return _quality(weights, _RANGES["csv"]) > _quality(weights, _RANGES["json"])


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (Mapping, list, tuple)):
        return neutralized(json.dumps(value, sort_keys=True, separators=(",", ":")))
    return neutralized(str(value))


def csv_text(items: Sequence[Mapping[str, Any]]) -> str:
    """``items`` (JSON-ready: strings, numbers, nested dicts/lists) as CSV text."""
    header: dict[str, None] = {}
    for item in items:
        header.update(dict.fromkeys(item))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([neutralized(key) for key in header])
    for item in items:
        writer.writerow([_cell(item.get(key)) for key in header])
    return out.getvalue()


def csv_response(
    request: Request, items: Sequence[Mapping[str, Any]], *, name: str, next_cursor: str | None
) -> Response:
    """The CSV attachment ``<name>.csv``, with a ``Link`` to the next page if any."""
    headers = {"Content-Disposition": f'attachment; filename="{name}.csv"'}
    if next_cursor is not None:
        headers["Link"] = f'<{next_page_url(request, next_cursor)}>; rel="next"'
    return Response(csv_text(items), media_type=f"{CSV_MEDIA}; charset=utf-8", headers=headers)


#: what a path keeps unescaped in a link (RFC 3986 pchar and "/"): ``<``, ``>``, spaces and
#: quotes in a stream or quota name cannot end the header's ``<...>``
_PATH_SAFE = "/!$&'()*+,;=:@-._~"


def next_page_url(request: Request, cursor: str) -> str:
    """The URL of the page after this one: this request's path and query with ``cursor``,
    under the configured public URL (``DLC_PUBLIC_URL``, ``app.state.public_url``), else a
    relative reference (``/v1/...?...``). Never from the ``Host`` header, which the client
    writes."""
    base: str = getattr(request.app.state, "public_url", None) or ""
    path = quote(request.scope["path"], safe=_PATH_SAFE)
    query = request.url.include_query_params(cursor=cursor).query
    return f"{base.rstrip('/')}{path}?{query}"
