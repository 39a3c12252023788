"""Prices: the price books and spot price changes."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from pydantic import (
    AwareDatetime,
    Field,
)

from ledger.bounds import (
    MAX_IDLE_MULTIPLIER,
    Bound,
)
from ledger.envelopes import EventData, event_type
from ledger.events.common import (
    Name,
    Part,
    RateBound,
)

__all__ = ["PriceBookPublished", "Rates", "SpotPriceChanged"]


class Rates(Part):
    """Per unit-hour rates keyed by resource: ``gpu/<model>``, ``gpu/any``, ``cpu``, ``memory``."""

    public: Annotated[dict[str, Decimal], RateBound] = {}
    spot: Annotated[dict[str, Decimal], RateBound] = {}


@event_type("PriceBookPublished")
class PriceBookPublished(EventData):
    book_id: str = Name
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    scale: int = Field(ge=0, le=6)
    effective_from: AwareDatetime
    rates: Rates
    idle_multiplier: Annotated[Decimal, Bound(MAX_IDLE_MULTIPLIER)] = Field(ge=0)


@event_type("SpotPriceChanged")
class SpotPriceChanged(EventData):
    resource: str = Name
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    rate: Annotated[Decimal, RateBound] = Field(ge=0)
    effective_from: AwareDatetime
