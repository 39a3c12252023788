"""Decoding events against the catalogue: a wire message or a stored envelope to its
typed payload, upcast to the version this code knows.

Apart from :mod:`ledger.envelopes` (the envelope and the registry, which knows no event)
so the dependency runs one way: the catalogue (:mod:`ledger.events`) registers its types
into the envelope module's registry, and this module imports both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

import ledger.events  # noqa: F401  (the catalogue registers its types when imported)
from ledger.bounds import OutOfBounds, check_bounds
from ledger.envelopes import (
    MAX_EVENT_BYTES,
    Envelope,
    EventData,
    InvalidEvent,
    OutOfBoundsEvent,
    OversizedEvent,
    UnknownEventType,
    UnsupportedSchemaVersion,
    registered_class,
    registered_names,
    summarise,
    upcaster_for,
)

__all__ = ["decode", "envelope_from_wire", "registered_types"]


def envelope_from_wire(raw: bytes | str | Mapping[str, Any]) -> Envelope:
    """Parse and validate a wire message; every failure is an :class:`EventDecodeError`."""
    try:
        if isinstance(raw, (bytes, str)):
            size = len(raw.encode() if isinstance(raw, str) else raw)
            if size > MAX_EVENT_BYTES:
                raise OversizedEvent(f"message of {size} bytes exceeds {MAX_EVENT_BYTES}")
            # pydantic parses the JSON itself: one pass, no intermediate dict
            envelope = Envelope.model_validate_json(raw)
        else:
            envelope = Envelope.model_validate(raw)
    except ValidationError as exc:
        if exc.errors()[0]["type"] == "json_invalid":
            raise InvalidEvent(f"not JSON: {exc.errors()[0]['msg']}") from exc
        raise InvalidEvent(summarise(exc)) from exc
    typed = decode(envelope)  # type and payload must be known and valid too
    try:
        check_bounds(typed, f"{envelope.type}: ")  # a new fact: bounds apply (not on read)
    except OutOfBounds as exc:
        raise OutOfBoundsEvent(str(exc)) from None
    if envelope.schema_version == typed.schema_version:
        # store the payload in its normal form (1.0 -> 1, defaults filled in), so
        # two producers' renderings of one fact hash the same
        normal = typed.model_dump(mode="json")
        if normal != envelope.data:
            fields = dict(envelope.__dict__)
            fields["data"] = normal
            envelope = Envelope.model_construct(**fields)
    return envelope


def registered_types() -> Mapping[str, type[EventData]]:
    """Every event type of the catalogue, by wire name."""
    return {name: cls for name in registered_names() if (cls := registered_class(name))}


def decode(envelope: Envelope) -> EventData:
    """The typed payload of ``envelope``, upcast to the version this code knows."""
    cls = registered_class(envelope.type)
    if cls is None:
        raise UnknownEventType(f"unknown event type {envelope.type!r}")
    version = envelope.schema_version
    if version > cls.schema_version:
        raise UnsupportedSchemaVersion(
            f"{envelope.type} schema_version {version} is newer than {cls.schema_version}"
        )
    data = envelope.data
    while version < cls.schema_version:
        step = upcaster_for(envelope.type, version)
        if step is None:
            raise UnsupportedSchemaVersion(
                f"no upcaster for {envelope.type} from schema_version {version}"
            )
        data = step(dict(data))
        version += 1
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise InvalidEvent(f"{envelope.type}: {summarise(exc)}") from exc
