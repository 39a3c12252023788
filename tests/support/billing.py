"""Builders for the billing end-to-end tests: occupancy events, price books, ledger queries."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import text

from dlc_ledger.services.yaml_files import load_price_book, parse_price_book
from ledger.envelopes import Envelope, make_envelope
from ledger.events import BillingMode, OccupancyEnded, OccupancyStarted
from ledger.ids import fact_event_id
from ledger.prices import PriceBook
from ledger.store.postgres import PostgresEventStore
from tests.support.demo_files import DEMO_PRICE_BOOK as DEMO_BOOK

__all__ = [
    "DEMO_BOOK",
    "at",
    "book_yaml",
    "demo_book",
    "ended",
    "query",
    "started",
]


def at(value: str) -> datetime:
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


def demo_book() -> PriceBook:
    return load_price_book(DEMO_BOOK)


def book_yaml(
    book_id: str,
    effective_from: str,
    gpu: str = "2.40",
    spot_gpu: str = "0.90",
    cpu: str = "0.048",
    memory: str = "0.006",
) -> PriceBook:
    return parse_price_book(
        f"""
id: {book_id}
currency: USD
scale: 2
effective_from: "{effective_from}"
rates:
  public: {{gpu/any: "{gpu}", cpu: "{cpu}", memory: "{memory}"}}
  spot: {{gpu/any: "{spot_gpu}", cpu: "0.020", memory: "0.002"}}
idle_multiplier: "0.30"
"""
    )


def started(
    occ: str,
    start: datetime,
    *,
    workspace: str = "ws-a",
    job: str | None = None,
    mgpu: int = 1000,
    cpu_milli: int = 0,
    memory_mib: int = 0,
    mode: BillingMode = "public",
    quota: str | None = None,
    user: str = "alice",
    flavor: str = "gpu/any",
) -> Envelope:
    job_uid = job or f"job-{occ}"
    data = OccupancyStarted(
        flavor=flavor,
        occupancy_id=occ,
        job_uid=job_uid,
        pod_uid=occ,
        mgpu=mgpu,
        cpu_milli=cpu_milli,
        memory_mib=memory_mib,
        billing_mode=mode,
        workspace=workspace,
        quota=quota,
        user=user,
        started_at=start,
    )
    return make_envelope(
        data,
        event_id=fact_event_id("test", "Pod", occ, "started"),
        stream=f"job/{job_uid}",
        occurred_at=start,
        observed_at=start,
        source="kube-watcher/test",
    )


def ended(occ: str, end: datetime, *, job: str | None = None) -> Envelope:
    job_uid = job or f"job-{occ}"
    return make_envelope(
        OccupancyEnded(occupancy_id=occ, job_uid=job_uid, pod_uid=occ, ended_at=end),
        event_id=fact_event_id("test", "Pod", occ, "ended"),
        stream=f"job/{job_uid}",
        occurred_at=end,
        observed_at=end,
        source="kube-watcher/test",
    )


def query(store: PostgresEventStore, sql: str, **params: Any) -> list[Any]:
    with store.engine.connect() as conn:
        return list(conn.execute(text(sql), params).all())
