"""CSV for every list and table route: ``?format=csv`` or ``Accept: text/csv``.

One implementation for all of them (stdlib :mod:`csv`): the header row is the items'
keys in the order they first appear, one row per item; a nested value (a dict or a
list, say a queued job's ``request``) is JSON in its cell, ``null`` an empty cell.
The file is an attachment named for the route; a page continues through a ``Link:
<…&cursor=X>; rel="next"`` header, as the JSON body's ``next_cursor`` does.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Any

from fastapi import Query, Request, Response

__all__ = [
    "CSV_MEDIA",
    "CSV_RESPONSES",
    "FormatQuery",
    "ListFormat",
    "csv_response",
    "csv_text",
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
    """CSV when asked by ``format``, else when the ``Accept`` header names text/csv."""
    if fmt is not None:
        return fmt is ListFormat.csv
    accepted = (part.split(";")[0].strip() for part in request.headers.get("accept", "").split(","))
    return CSV_MEDIA in accepted


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (Mapping, list, tuple)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def csv_text(items: Sequence[Mapping[str, Any]]) -> str:
    """``items`` (JSON-ready: strings, numbers, nested dicts/lists) as CSV text."""
    header: dict[str, None] = {}
    for item in items:
        header.update(dict.fromkeys(item))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(header)
    for item in items:
        writer.writerow([_cell(item.get(key)) for key in header])
    return out.getvalue()


def csv_response(
    request: Request, items: Sequence[Mapping[str, Any]], *, name: str, next_cursor: str | None
) -> Response:
    """The CSV attachment ``<name>.csv``, with a ``Link`` to the next page if any."""
    headers = {"Content-Disposition": f'attachment; filename="{name}.csv"'}
    if next_cursor is not None:
        following = request.url.include_query_params(cursor=next_cursor)
        headers["Link"] = f'<{following}>; rel="next"'
    return Response(csv_text(items), media_type=f"{CSV_MEDIA}; charset=utf-8", headers=headers)
