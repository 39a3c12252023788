"""The value syntaxes of the Kubernetes API that the watcher reads from raw objects.

Objects arrive as JSON dicts (never client models: parsing them into models costs more than
everything else together); these read their resource quantities (``500m``, ``16Gi``), their
RFC 3339 timestamps and their metadata maps, tolerating what a malformed object leaves out.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from ledger.errors import Invalid

__all__ = ["MIB", "object_meta", "parse_quantity", "parse_time", "str_map"]

_SUFFIX: Final[Mapping[str, Decimal]] = {
    "m": Decimal("0.001"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
MIB = Decimal(2**20)


def parse_quantity(value: Any) -> Decimal:
    """A Kubernetes resource quantity (``500m``, ``2``, ``16Gi``, ``1e3``) as a Decimal."""
    if value is None:
        return Decimal(0)
    if isinstance(value, int | float):
        return Decimal(str(value))
    text = str(value).strip()
    if text.isdigit():
        return Decimal(int(text))
    for suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "m", "k", "M", "G", "T", "P", "E"):
        if text.endswith(suffix) and not (suffix == "E" and "e" in text.lower()[:-1]):
            try:
                return Decimal(text[: -len(suffix)]) * _SUFFIX[suffix]
            except InvalidOperation:
                break
    try:
        return Decimal(text)
    except InvalidOperation as exc:
        raise Invalid(f"invalid quantity {value!r}") from exc


def parse_time(text: str | None) -> datetime | None:
    """An RFC 3339 API timestamp (``2026-11-01T00:00:00Z``) as an aware datetime; anything
    else is :class:`Invalid` (a bad item, dead-lettered by the watcher)."""
    if not text:
        return None
    cached = _TIMES.get(text)
    if cached is None:
        try:
            cached = datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
        except (ValueError, OverflowError, TypeError, AttributeError):
            # an object's field, not the watcher's fault: quarantined as an unmappable one
            raise Invalid(f"invalid timestamp {str(text)[:64]!r}") from None
        if len(_TIMES) > 100_000:
            _TIMES.clear()
        _TIMES[text] = cached
    return cached


_TIMES: dict[str, datetime] = {}


def object_meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """An object's ``metadata``; empty when it has none (or not a mapping)."""
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def str_map(value: Any) -> Mapping[str, str]:
    """A labels / annotations / selector map; empty when absent or not a mapping."""
    return value if isinstance(value, Mapping) else {}
