"""Canonical JSON: the one byte form of an event that hashes and dedupe compare.

Every hash in the store (the tamper-evident chain and the payload fingerprint that
decides whether a redelivered event is "the same") is taken over these bytes, so
the encoding must be a pure function of the value: sorted keys, no whitespace,
UTC timestamps with a ``Z`` suffix and microseconds, decimals as strings.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import orjson

__all__ = ["canonical_json", "format_timestamp", "parse_timestamp"]


def format_timestamp(value: datetime) -> str:
    """Render an aware datetime as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` in UTC."""
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r}: every timestamp in the ledger is UTC-aware")
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_timestamp(text: str) -> datetime:
    """Parse an ISO-8601 timestamp; a value without an offset is refused."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no UTC offset")
    return value.astimezone(UTC)


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not canonically serialisable")


def canonical_json(value: Any) -> bytes:
    """Encode ``value`` canonically. Floats are refused: money and quantities are exact."""
    return orjson.dumps(
        _normalise(value),
        default=_default,
        option=orjson.OPT_SORT_KEYS,
    )


def _normalise(value: Any) -> Any:
    # orjson renders datetimes in its own shape; the ledger's shape is fixed above.
    if isinstance(value, dict):
        return {str(k): _normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, float):
        raise TypeError(f"float {value!r} in an event: use int or Decimal for exact values")
    return value
