"""The APScheduler job runs tick() with the clock it is given (the cluster's, in replays)."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from consumers.billing_scheduler import build_scheduler
from dlc_ledger.services.billing import publish_price_book
from ledger.store.postgres import PostgresEventStore
from processes.billing import TickResult
from tests.support.billing import at, demo_book, ended, started


def test_scheduler_ticks_on_the_given_clock_and_issues_due_invoices(
    store: PostgresEventStore,
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    store.append([started("a", at("2026-11-05T00:00")), ended("a", at("2026-11-05T10:00"))])
    ticked = threading.Event()
    results: list[TickResult] = []

    def on_tick(result: TickResult) -> None:
        results.append(result)
        ticked.set()

    scheduler = build_scheduler(
        store, lambda: at("2026-12-02T00:30"), interval=timedelta(seconds=30), on_tick=on_tick
    )
    scheduler.start()  # type: ignore[attr-defined]
    try:
        assert ticked.wait(20)
    finally:
        scheduler.shutdown(wait=True)  # type: ignore[attr-defined]
    assert results[0].accrued_to == at("2026-12-02T00:00")
    assert len(results[0].invoices) == 1


def test_a_clock_with_no_now_yet_skips_the_tick(store: PostgresEventStore) -> None:
    """``billing serve --clock cluster`` before any cluster fact is stored: no tick (a
    tick at some stand-in instant would renew, accrue and close at it), then ticks as soon
    as the clock has a time."""
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    store.append([started("a", at("2026-11-05T00:00")), ended("a", at("2026-11-05T10:00"))])
    asked: list[int] = []
    results: list[TickResult] = []
    ticked = threading.Event()

    def clock() -> datetime | None:
        asked.append(1)
        return None if len(asked) < 3 else at("2026-12-02T00:30")

    def on_tick(result: TickResult) -> None:
        results.append(result)
        ticked.set()

    scheduler = build_scheduler(store, clock, interval=timedelta(seconds=0.2), on_tick=on_tick)
    scheduler.start()  # type: ignore[attr-defined]
    try:
        assert ticked.wait(20)
    finally:
        scheduler.shutdown(wait=True)  # type: ignore[attr-defined]
    assert len(asked) >= 3  # two ticks asked and skipped
    assert results[0].accrued_to == at("2026-12-02T00:00")
