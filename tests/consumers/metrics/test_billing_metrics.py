"""The billing scheduler's metrics after one tick that rates an occupancy and issues
its invoice, scraped over HTTP."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from consumers.billing_scheduler import build_scheduler
from dlc_ledger.services.billing import publish_price_book
from ledger.store.postgres import PostgresEventStore
from processes.billing import TickResult
from tests.support.billing import at, demo_book, ended, started
from tests.support.metrics import scrape


def test_a_tick_counts_transactions_and_invoices(
    store: PostgresEventStore, metrics_url: str
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    store.append([started("a", at("2026-11-05T00:00")), ended("a", at("2026-11-05T10:00"))])
    before = scrape(metrics_url)
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
    after = scrape(metrics_url)

    def delta(name: str) -> float:
        return after.get((name, ()), 0.0) - before.get((name, ()), 0.0)

    assert delta("dlc_billing_ticks_total") == 1
    assert delta("dlc_billing_transactions_total") == results[0].rated.posted > 0
    assert delta("dlc_billing_invoices_total") == 1
    assert abs(after[("dlc_billing_last_tick_timestamp_seconds", ())] - time.time()) < 60
