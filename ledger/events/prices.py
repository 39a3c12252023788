"""Prices: the price books and spot price changes."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
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

__all__ = ["PriceBookPublished", "PricedWorkload", "Rates", "SpotPriceChanged"]

#: The workloads a price book may price apart from training jobs (docs/workloads.md).
PricedWorkload = Literal["service", "notebook"]


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
    #: rates of services and notebooks where they differ from the jobs' (``rates``); a
    #: resource their table does not price is rated as a job's. Left out of the payload
    #: when empty, so books published before it keep their exact bytes.
    workload_rates: dict[PricedWorkload, Rates] = {}

    @model_serializer(mode="wrap")
    def _without_empty_workload_rates(self, handler: SerializerFunctionWrapHandler) -> Any:
        data: dict[str, Any] = handler(self)
        if not data.get("workload_rates"):
            data.pop("workload_rates", None)
        return data


@event_type("SpotPriceChanged")
class SpotPriceChanged(EventData):
    resource: str = Name
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    rate: Annotated[Decimal, RateBound] = Field(ge=0)
    effective_from: AwareDatetime
