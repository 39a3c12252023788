"""Shared builders for the pure billing tests: price events, occupancies, instants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from hypothesis import strategies as st

from dlc_ledger.services.yaml_files import load_price_book
from ledger.events import BillingMode, PriceBookPublished, Rates, SpotPriceChanged
from ledger.prices import PriceSchedule
from ledger.rating import Occupancy
from tests.support.demo_files import DEMO_PRICE_BOOK as DEMO

__all__ = [
    "A100",
    "DEMO",
    "MODES",
    "SCHEDULE",
    "T0",
    "at",
    "book",
    "demo",
    "micros",
    "occupancies",
    "occupancy",
    "spot",
]


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


def demo() -> PriceSchedule:
    return PriceSchedule([load_price_book(DEMO).to_event()])


A100 = "gpu/A100-SXM4-80GB"
T0 = at("2026-01-01T00:00")
SPAN = timedelta(days=75)


def busy_schedule() -> PriceSchedule:
    return PriceSchedule(
        [
            book("a", "2026-01-01T00:00", {"gpu/any": "2.40", A100: "3.33", "cpu": "0.048",
                 "memory": "0.006"}, {"gpu/any": "0.90", "cpu": "0.020", "memory": "0.002"}),
            spot("gpu/any", "1.17", "2026-01-07T03:17:11"),
            spot("cpu", "0.031", "2026-01-20T00:00:00.5"),
            book("b", "2026-01-31T13:13:13", {"gpu/any": "2.70", "cpu": "0.051", "memory": "0.007"},
                 {"gpu/any": "0.95", A100: "1.40", "cpu": "0.021", "memory": "0.003"}, idle="0.35"),
            spot(A100, "1.23", "2026-02-14T14:14:14"),
            book("c", "2026-03-01T00:00", {"gpu/any": "2.20", "cpu": "0.045", "memory": "0.005"},
                 {"gpu/any": "0.85", "cpu": "0.019", "memory": "0.002"}, idle="0.30"),
        ]
    )  # fmt: skip


SCHEDULE = busy_schedule()
MODES: list[BillingMode] = ["public", "spot", "idle", "quota"]
micros = st.integers(min_value=0, max_value=int(SPAN / timedelta(microseconds=1)))


@st.composite
def occupancies(draw: st.DrawFn, open_: bool = False) -> Occupancy:
    a, b = sorted((draw(micros), draw(micros)))
    start = T0 + timedelta(microseconds=a)
    return Occupancy(
        occupancy_id=f"occ-{draw(st.integers(0, 5))}",
        job_uid="job-x",
        workspace="ws-p",
        flavor=draw(st.sampled_from(["gpu/any", A100, "gpu/H100"])),
        mgpu=draw(st.integers(0, 8000)),
        cpu_milli=draw(st.integers(0, 64000)),
        memory_mib=draw(st.integers(0, 512 * 1024)),
        billing_mode=draw(st.sampled_from(MODES)),
        start=start,
        end=None if open_ else T0 + timedelta(microseconds=b),
    )
