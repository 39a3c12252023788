"""Canonical JSON: the one byte form of an event that hashes and dedupe compare.

Every hash in the store (the tamper-evident chain and the payload fingerprint that
decides whether a redelivered event is "the same") is taken over these bytes, so
the encoding must be a pure function of the value: sorted keys, no whitespace,
timestamps in UTC with a ``Z`` suffix (microseconds only when non-zero, as
orjson renders them), decimals and UUIDs as strings. Money never travels as a
float: rates are decimal strings and amounts integer minor units.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import orjson

from ledger.errors import Invalid

__all__ = ["Fragment", "NotCanonical", "canonical_json", "format_timestamp", "parse_timestamp"]

_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_UTC_Z

#: Already-canonical JSON embedded as-is (lets the store serialise ``data`` once).
Fragment = orjson.Fragment


class NotCanonical(Invalid, TypeError):
    """A value the canonical encoding cannot hold (the data's fault, never the store's)."""


def format_timestamp(value: datetime) -> str:
    """Render an aware datetime in UTC, e.g. ``2026-11-01T00:00:00Z``."""
    if value.tzinfo is None:
        raise Invalid(f"naive datetime {value!r}: every timestamp in the ledger is UTC-aware")
    return orjson.dumps(value.astimezone(UTC), option=orjson.OPT_UTC_Z)[1:-1].decode()


def parse_timestamp(text: str) -> datetime:
    """Parse an ISO-8601 timestamp; a value without an offset is refused."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise Invalid(f"timestamp {text!r} has no UTC offset")
    return value.astimezone(UTC)


def _default(value: Any) -> Any:
    if isinstance(value, (Decimal, UUID)):
        return str(value)
    raise NotCanonical(f"{type(value).__name__} is not canonically serialisable")


def canonical_json(value: Any) -> bytes:
    """Encode ``value`` canonically (sorted keys, compact).

    Datetimes must already be in UTC (the envelope guarantees it for its own
    fields; payloads carry timestamps as strings): orjson renders them natively,
    which is several times faster than formatting each in Python.
    """
    try:
        return orjson.dumps(value, default=_default, option=_OPTIONS)
    except orjson.JSONEncodeError as exc:  # orjson's own refusal (an int beyond 64 bits, ...)
        if isinstance(exc.__cause__, NotCanonical):
            raise exc.__cause__ from None
        raise NotCanonical(f"not canonically serialisable: {exc}") from exc
