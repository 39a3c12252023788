"""The event envelope of DESIGN §3 and its wire codec.

An :class:`Envelope` is what travels on Kafka and what the store records: the
metadata every event shares plus an untyped ``data`` mapping. Typed views of
``data`` are the catalogue models in :mod:`ledger.events`; :func:`decode` turns
an envelope into one, upcasting older schema versions on the way.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar
from uuid import UUID

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from ledger.bounds import check_bounds, check_instant, check_text
from ledger.canonical import canonical_json
from ledger.errors import Invalid

__all__ = [
    "MAX_EVENT_BYTES",
    "Envelope",
    "EventData",
    "EventDecodeError",
    "InvalidEvent",
    "OutOfBoundsEvent",
    "OversizedEvent",
    "UnknownEventType",
    "UnsupportedSchemaVersion",
    "event_type",
    "registered_class",
    "registered_names",
    "summarise",
    "upcaster",
    "upcaster_for",
]

#: A message larger than this is refused at ingest (Kafka's default max is 1 MiB).
MAX_EVENT_BYTES = 1_000_000


class EventDecodeError(Invalid):
    """An event that cannot be turned into a known, valid domain event."""

    reason: ClassVar[str] = "invalid"


class InvalidEvent(EventDecodeError):
    reason = "invalid-schema"


class OversizedEvent(EventDecodeError):
    reason = "oversized"


class OutOfBoundsEvent(EventDecodeError):
    """A valid event whose values a fact may not have (``ledger.bounds``)."""

    reason = "out-of-bounds"


class UnknownEventType(EventDecodeError):
    reason = "unknown-type"


class UnsupportedSchemaVersion(EventDecodeError):
    reason = "newer-schema-version"


class EventData(BaseModel):
    """Base of every catalogue payload. Subclasses register with :func:`event_type`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type_name: ClassVar[str] = ""
    schema_version: ClassVar[int] = 1


class Envelope(BaseModel):
    """One event: identity, placement in a stream, clocks, provenance and payload."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_id: UUID
    type: str = Field(min_length=1, max_length=100)
    schema_version: int = Field(ge=1)
    stream: str = Field(min_length=3, max_length=300, pattern=r"^[a-z-]+/.+$")
    occurred_at: AwareDatetime
    observed_at: AwareDatetime
    source: str = Field(min_length=1, max_length=200)
    causation_id: UUID | None = None
    correlation_id: UUID | None = None
    data: dict[str, Any]

    @field_validator("occurred_at", "observed_at")
    @classmethod
    def _in_utc(cls, value: datetime, info: ValidationInfo) -> datetime:
        # in range first: near datetime's edges the conversion itself overflows
        check_instant(value, str(info.field_name))
        # one instant, one rendering: canonical JSON depends on it
        return value.astimezone(UTC)

    @field_validator("type", "stream", "source")
    @classmethod
    def _storable(cls, value: str, info: ValidationInfo) -> str:
        check_text(value, str(info.field_name))
        return value

    def to_wire(self, data: Any = None) -> dict[str, Any]:
        """The mapping :func:`canonical_json` encodes (optional ids omitted when absent).

        Timestamps stay datetimes (UTC, rendered by the encoder); ``data`` may be
        passed pre-serialised as a :data:`Fragment`.
        """
        wire: dict[str, Any] = {
            "event_id": str(self.event_id),
            "type": self.type,
            "schema_version": self.schema_version,
            "stream": self.stream,
            "occurred_at": self.occurred_at,
            "observed_at": self.observed_at,
            "source": self.source,
            "data": self.data if data is None else data,
        }
        if self.causation_id is not None:
            wire["causation_id"] = str(self.causation_id)
        if self.correlation_id is not None:
            wire["correlation_id"] = str(self.correlation_id)
        return wire

    def to_json(self) -> bytes:
        """Canonical JSON bytes: the Kafka message value."""
        return canonical_json(self.to_wire())

    def fact(self, data: Any = None) -> dict[str, Any]:
        """What makes two copies of an event "the same": the fact, not who saw it when.

        ``observed_at``, ``source`` and the causation ids may differ between a first
        observation and a re-list of the same fact; they are not compared.
        """
        return fact_fields(
            self.type,
            self.schema_version,
            self.stream,
            self.occurred_at,
            self.data if data is None else data,
        )


def fact_fields(
    type_: str, schema_version: int, stream: str, occurred_at: datetime, data: Any
) -> dict[str, Any]:
    """The fact of an event as a mapping (see :meth:`Envelope.fact`), from its parts."""
    return {
        "type": type_,
        "schema_version": schema_version,
        "stream": stream,
        "occurred_at": occurred_at,
        "data": data,
    }


# --- registry and upcasting -------------------------------------------------

_TYPES: dict[str, type[EventData]] = {}
_UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {}

D = TypeVar("D", bound=type[EventData])


def event_type(name: str, *, version: int = 1) -> Callable[[D], D]:
    """Class decorator: register a payload model under its wire type name."""

    def register(cls: D) -> D:
        if name in _TYPES:
            raise Invalid(f"event type {name!r} registered twice")
        cls.type_name = name
        cls.schema_version = version
        _TYPES[name] = cls
        return cls

    return register


def upcaster(
    type_name: str, from_version: int
) -> Callable[
    [Callable[[dict[str, Any]], dict[str, Any]]], Callable[[dict[str, Any]], dict[str, Any]]
]:
    """Register a function turning version ``from_version`` data into ``from_version + 1``."""

    def register(
        fn: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> Callable[[dict[str, Any]], dict[str, Any]]:
        _UPCASTERS[(type_name, from_version)] = fn
        return fn

    return register


def registered_class(type_name: str) -> type[EventData] | None:
    """The payload class registered under ``type_name`` (None: unknown). The catalogue
    (:mod:`ledger.events`) registers itself when imported; :mod:`ledger.catalogue` makes
    sure it has been before it decodes."""
    return _TYPES.get(type_name)


def registered_names() -> list[str]:
    """Every registered wire type name."""
    return list(_TYPES)


def upcaster_for(
    type_name: str, from_version: int
) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """The function turning ``type_name``'s ``from_version`` data into the next version."""
    return _UPCASTERS.get((type_name, from_version))


def summarise(exc: ValidationError) -> str:
    """A validation error in one line: its first three problems and how many more."""
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        parts.append(f"{loc}: {err['msg']}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def make_envelope(
    data: EventData,
    *,
    event_id: UUID,
    stream: str,
    occurred_at: datetime,
    observed_at: datetime,
    source: str,
    causation_id: UUID | None = None,
    correlation_id: UUID | None = None,
) -> Envelope:
    """Wrap a typed payload; ``data`` is stored in its JSON form (decimals as strings).

    A new fact: its bounds are checked (:class:`ledger.bounds.OutOfBounds`, a ValueError).
    """
    check_bounds(data, f"{data.type_name}: ")
    return Envelope(
        event_id=event_id,
        type=data.type_name,
        schema_version=data.schema_version,
        stream=stream,
        occurred_at=occurred_at,
        observed_at=observed_at,
        source=source,
        causation_id=causation_id,
        correlation_id=correlation_id,
        data=data.model_dump(mode="json"),
    )


__all__ += ["fact_fields", "make_envelope"]
