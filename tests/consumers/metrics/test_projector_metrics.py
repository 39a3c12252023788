"""The following projector's metrics, scraped over HTTP: positions applied and an exact
lag per projection that returns to 0 once it has caught up."""

from __future__ import annotations

import threading
import time

from consumers.projector import Projector
from ledger.store.postgres import PostgresEventStore
from projections.registry import all_projections
from tests.support.factories import job_succeeded, occupancy_started
from tests.support.metrics import Scrape, scrape


def _lags(found: Scrape) -> dict[str, float]:
    return {
        dict(labels)["projection"]: value
        for (name, labels), value in found.items()
        if name == "dlc_projection_lag_events"
    }


def _wait(condition: object, seconds: float = 20.0) -> None:
    assert callable(condition)
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_lag_per_projection_and_positions_applied(
    store: PostgresEventStore, metrics_url: str
) -> None:
    projections = all_projections()
    before = scrape(metrics_url).get(("dlc_projector_positions_total", ()), 0.0)
    store.append([occupancy_started(n) for n in range(5)] + [job_succeeded(0)])
    stop = threading.Event()
    runner = threading.Thread(
        target=Projector(store, projections).run_forever,
        args=(stop,),
        kwargs={"poll_interval": 0.1},
    )
    runner.start()
    try:
        _wait(
            lambda: (
                scrape(metrics_url).get(("dlc_projector_positions_total", ()), 0.0) - before >= 6
            )
        )
        found = scrape(metrics_url)
        assert set(_lags(found)) >= {p.name for p in projections}
        assert all(v == 0 for k, v in _lags(found).items() if k in {p.name for p in projections})
    finally:
        stop.set()
        runner.join(10)
    assert not runner.is_alive()
