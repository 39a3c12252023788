"""Shared builders for the pure billing tests: price events, occupancies, instants."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from ledger.events import BillingMode, PriceBookPublished, Rates, SpotPriceChanged
from ledger.rating import Occupancy

__all__ = ["at", "book", "occupancy", "spot"]


def at(text: str) -> datetime:
    """An aware UTC instant from ``YYYY-MM-DDTHH:MM[:SS]``."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def book(
    book_id: str,
    effective_from: str,
    public: dict[str, str],
    spot: dict[str, str] | None = None,
    idle: str = "0.30",
    currency: str = "USD",
    scale: int = 2,
) -> PriceBookPublished:
    return PriceBookPublished(
        book_id=book_id,
        currency=currency,
        scale=scale,
        effective_from=at(effective_from),
        rates=Rates(
            public={k: Decimal(v) for k, v in public.items()},
            spot={k: Decimal(v) for k, v in (spot or {}).items()},
        ),
        idle_multiplier=Decimal(idle),
    )


def spot(resource: str, rate: str, effective_from: str, currency: str = "USD") -> SpotPriceChanged:
    return SpotPriceChanged(
        resource=resource, currency=currency, rate=Decimal(rate), effective_from=at(effective_from)
    )


def occupancy(
    start: str | datetime,
    end: str | datetime | None,
    *,
    mode: BillingMode = "public",
    flavor: str = "gpu/any",
    mgpu: int = 1000,
    cpu_milli: int = 0,
    memory_mib: int = 0,
    occupancy_id: str = "occ-1",
    job_uid: str = "job-1",
    workspace: str = "ws-a",
) -> Occupancy:
    return Occupancy(
        occupancy_id=occupancy_id,
        job_uid=job_uid,
        workspace=workspace,
        flavor=flavor,
        mgpu=mgpu,
        cpu_milli=cpu_milli,
        memory_mib=memory_mib,
        billing_mode=mode,
        start=at(start) if isinstance(start, str) else start,
        end=at(end) if isinstance(end, str) else end,
    )
