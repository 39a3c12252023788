"""Bounded reads: the page and report maxima, and the one keyset cursor every list uses.

A list that can grow without bound (jobs, invoices, credit notes, dead letters, price
events) returns at most ``limit`` rows, ``limit`` at most :data:`MAX_PAGE`, and a cursor
naming the last row's sort key: the next page starts strictly after it, so a page never
repeats or skips a row while new ones arrive (no OFFSET). A report returns at most
:data:`MAX_REPORT_ROWS` rows and refuses a bigger answer with a message saying how to
narrow it, before doing the work where it can count ahead.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ledger.errors import Invalid

__all__ = [
    "MAX_PAGE",
    "MAX_REPORT_ROWS",
    "Page",
    "check_limit",
    "check_report_rows",
    "decode_cursor",
    "encode_cursor",
]

#: The largest page any listing returns at once (``--limit``).
MAX_PAGE = 10_000

#: The most rows any report returns (a chart or a spreadsheet needs no more).
MAX_REPORT_ROWS = 100_000


@dataclass(frozen=True)
class Page:
    """One page of a list; ``next_cursor`` continues it (None: the last page)."""

    rows: list[dict[str, Any]]
    next_cursor: str | None


def check_limit(limit: int, *, option: str = "--limit") -> None:
    """A ``ValueError`` unless ``1 <= limit <=`` :data:`MAX_PAGE`."""
    if not 1 <= limit <= MAX_PAGE:
        raise Invalid(f"{option} must be between 1 and {MAX_PAGE:,} (got {limit:,})")


def encode_cursor(key: Sequence[str | int | None]) -> str:
    """An opaque, URL-safe cursor for a row's sort key (strings, integers, None)."""
    return base64.urlsafe_b64encode(orjson.dumps(list(key))).decode().rstrip("=")


def decode_cursor(cursor: str, *kinds: type | tuple[type, ...]) -> list[Any]:
    """The sort key :func:`encode_cursor` wrapped, one value per kind (``int``, ``str``,
    ``(str, type(None))``); a one-line ``ValueError`` for anything else (a cursor is
    user input)."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = orjson.loads(raw)
    except (ValueError, TypeError):
        key = None
    if (
        not isinstance(key, list)
        or len(key) != len(kinds)
        or not all(
            isinstance(v, kind) and not isinstance(v, bool)
            for v, kind in zip(key, kinds, strict=False)
        )
    ):
        raise Invalid(f"invalid cursor {cursor[:40]!r}: pass the one a previous page printed")
    return key


def check_report_rows(count: int, *, hint: str) -> None:
    """A ``ValueError`` if a report would return more than :data:`MAX_REPORT_ROWS` rows
    (``count`` may be a lower bound: the rows seen so far); ``hint`` says how to narrow."""
    if count > MAX_REPORT_ROWS:
        raise Invalid(f"the report has more than {MAX_REPORT_ROWS:,} rows: {hint}")
