"""Reading the billing read model back into domain values: the price schedule, occupancies."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from ledger.events import PriceBookPublished, SpotPriceChanged
from ledger.money import default_scale
from ledger.prices import PriceSchedule
from ledger.rating import Occupancy

__all__ = ["ScaleOf", "currency_scales", "load_schedule", "occupancy_from_row"]

#: currency -> its scale (minor-unit exponent)
ScaleOf = Callable[[str], int]


def load_schedule(conn: Connection, *, recorded_by: datetime | None = None) -> PriceSchedule:
    """The price schedule from the projection's price events (optionally as recorded by then)."""
    where = "WHERE recorded_at <= :t" if recorded_by is not None else ""
    rows = conn.execute(
        text(f"SELECT type, data FROM billing_prices {where} ORDER BY position"),
        {"t": recorded_by},
    ).all()
    events: list[PriceBookPublished | SpotPriceChanged] = []
    for kind, data in rows:
        model = PriceBookPublished if kind == "PriceBookPublished" else SpotPriceChanged
        events.append(model.model_validate(data))
    return PriceSchedule(events)


def occupancy_from_row(row: Any) -> Occupancy:
    """The rating input for a ``billing_occupancies`` row (an end never precedes its start)."""
    start = row.started_at
    end = row.ended_at
    return Occupancy(
        occupancy_id=row.occupancy_id,
        job_uid=row.job_uid,
        workspace=row.workspace,
        quota=row.quota,
        user=row.user_name or "unknown",
        flavor=row.flavor,
        mgpu=int(row.mgpu),
        cpu_milli=int(row.cpu_milli),
        memory_mib=int(row.memory_mib),
        billing_mode=row.billing_mode,
        start=start,
        end=None if end is None else max(end, start),
    )


def currency_scales(conn: Connection) -> ScaleOf:
    """The scale each currency is billed at: the price schedule's for its currency, else
    the ISO 4217 exponent."""
    schedule = load_schedule(conn)

    def scale_of(currency: str) -> int:
        if schedule.currency == currency and schedule.scale is not None:
            return schedule.scale
        return default_scale(currency)

    return scale_of
