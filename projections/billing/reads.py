"""Reading the billing read model back into domain values: the price schedule, occupancies."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, text

from ledger.money import default_scale

if TYPE_CHECKING:  # the event models and the rating engine load with the first schedule
    from ledger.prices import PriceSchedule
    from ledger.rating import Occupancy

__all__ = [
    "WORKLOAD_OF_OCCUPANCY",
    "ScaleOf",
    "billing_currency",
    "currency_scales",
    "load_schedule",
    "occupancy_from_row",
]

#: currency -> its scale (minor-unit exponent)
ScaleOf = Callable[[str], int]


def load_schedule(conn: Connection, *, recorded_by: datetime | None = None) -> PriceSchedule:
    """The price schedule from the projection's price events (optionally as recorded by then)."""
    from ledger.events import PriceBookPublished, SpotPriceChanged
    from ledger.prices import PriceSchedule

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
    from ledger.rating import Occupancy

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
        workload=getattr(row, "workload", None) or "training",
    )


#: SQL: the workload (``service``, ``notebook``) of a ``billing_occupancies`` row's job,
#: NULL for a training job's: whose rates apply (select it ``AS workload``).
WORKLOAD_OF_OCCUPANCY = (
    "(SELECT w.workload FROM billing_workloads w WHERE w.job_uid = billing_occupancies.job_uid)"
)


def _first_book(conn: Connection) -> Any:
    """The first price book's currency and scale (a row), or None before any."""
    return conn.execute(
        text(
            "SELECT data->>'currency', (data->>'scale')::int FROM billing_prices "
            "WHERE type = 'PriceBookPublished' ORDER BY position LIMIT 1"
        )
    ).first()


def billing_currency(conn: Connection) -> str | None:
    """The currency cost is billed in (every book of a schedule has the same); None before
    a price book is published: what a zero cost is stated in."""
    book = _first_book(conn)
    return None if book is None else str(book[0])


def currency_scales(conn: Connection) -> ScaleOf:
    """The scale each currency is billed at: the price books' for their currency (every
    book of a schedule has the same, :class:`ledger.prices.PriceSchedule`), else the ISO
    4217 exponent. One row read, no schedule built: every read that shows money asks."""
    book = _first_book(conn)

    def scale_of(currency: str) -> int:
        if book is not None and book[0] == currency and book[1] is not None:
            return int(book[1])
        return default_scale(currency)

    return scale_of
