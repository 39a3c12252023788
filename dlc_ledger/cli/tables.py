"""The one renderer every command prints rows through: a text table, JSON or CSV.

One rule for people reading a terminal: a column whose values are all numbers is
right-aligned with thousands separators (``1,267.21``, ``126,721``); anything else is
left-aligned; a missing value is ``-``. Machine formats (JSON, CSV) never see this:
they keep plain numbers, datetimes in ISO-8601 and decimals as strings.

Names come from events, and events from pod annotations anyone with a namespace can
write: a table cell (and every line-oriented output, through :func:`escape_controls`)
shows control characters escaped (``\n``, ``\x1b``, ``\u202e``), so a name can neither
split a row nor drive the terminal. JSON keeps the exact value; CSV too, except that a
text that could start a spreadsheet formula gets a leading ``'``
(:func:`dlc_ledger.presenters.neutralized`, the API's rule too).
"""

from __future__ import annotations

import csv
import io
import json
import sys
import unicodedata
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any

import typer

from dlc_ledger.presenters import neutralized
from ledger.errors import Invalid

__all__ = [
    "DocumentFormat",
    "DocumentFormatOption",
    "FormatOption",
    "RowFormat",
    "cell",
    "emit_rows",
    "escape_controls",
    "render_rows",
    "render_table",
]


class RowFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


FormatOption = Annotated[RowFormat, typer.Option("--format", help="table, json or csv.")]


class DocumentFormat(StrEnum):
    """For commands that show one nested document (a job, a quota): no CSV of it."""

    table = "table"
    json = "json"


DocumentFormatOption = Annotated[DocumentFormat, typer.Option("--format", help="table or json.")]

_NUMBER = (int, float, Decimal)


def _is_number(value: Any) -> bool:
    return isinstance(value, _NUMBER) and not isinstance(value, bool)


_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(char: str) -> str:
    if char in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with control and format characters (C0, DEL, C1, bidi overrides, line
    and paragraph separators) written as escapes: safe on one terminal line."""
    if text.isprintable():  # the common case: nothing to do
        return text
    return "".join(
        _escaped(c) if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c for c in text
    )


def cell(value: Any) -> str:
    """One value as a table shows it."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if _is_number(value):
        return f"{value:,}"
    if isinstance(value, datetime):
        return value.isoformat()
    return escape_controls(str(value))


def render_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """Aligned columns under a header and a rule; ``(no rows)`` for no rows."""
    if not rows:
        return "(no rows)"
    cols = list(columns or rows[0].keys())
    cells = [[cell(row.get(c)) for c in cols] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(cols)]
    numeric = [
        any(row.get(c) is not None for row in rows)
        and all(row.get(c) is None or _is_number(row.get(c)) for row in rows)
        for c in cols
    ]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ).rstrip()

    return "\n".join([line(cols), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


def _csv_cell(value: Any) -> Any:
    """A CSV cell: numbers as they are, text safe from spreadsheet formulas."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return neutralized(value if isinstance(value, str) else str(value))


def render_rows(rows: Sequence[Mapping[str, Any]], fmt: str) -> str:
    """``rows`` as a text table (:func:`render_table`), a JSON array or CSV with a header."""
    if fmt == "table":
        return render_table(rows)
    if fmt not in ("json", "csv"):
        raise Invalid(f"unknown --format {fmt!r}: use table, json or csv")
    plain = [{k: _plain(v) for k, v in r.items()} for r in rows]
    if fmt == "json":
        return json.dumps(plain, indent=2, default=str)
    out = io.StringIO()
    if plain:
        writer = csv.DictWriter(out, fieldnames=list(plain[0]), lineterminator="\n")
        writer.writerow({key: neutralized(key) for key in plain[0]})  # the header
        writer.writerows({k: _csv_cell(v) for k, v in row.items()} for row in plain)
    return out.getvalue().rstrip("\n")


def emit_rows(rows: Sequence[Mapping[str, Any]], fmt: str) -> None:
    """Print :func:`render_rows` of ``rows``."""
    sys.stdout.write(render_rows(rows, fmt) + "\n")
