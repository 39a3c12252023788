"""A slow Kafka never stalls the watch (checklist 17), and the watchers' migration branch."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import pytest
from sqlalchemy import inspect

from consumers.watchers.listwatch import JOBS, PODS
from kubesim import KubeSim
from ledger.envelopes import Envelope
from ledger.store.engines import make_engine
from migrations.runner import downgrade, upgrade
from tests.support.databases import TemplateDatabases
from tests.support.watchers import make_job, make_pod, start_watcher, wait_for


def test_slow_kafka_does_not_stall_the_watch(
    sim: KubeSim, caplog: pytest.LogCaptureFixture
) -> None:
    gate = threading.Event()
    handed: list[Envelope] = []  # taken by the publisher thread, stuck in "Kafka"
    published: list[Envelope] = []

    def blocked_publish(events: Sequence[Envelope]) -> None:
        handed.extend(events)
        gate.wait(30)  # Kafka is unreachable until the gate opens
        published.extend(events)

    watcher = start_watcher(
        sim, blocked_publish, resources=(JOBS, PODS), buffer_events=40, orphan_grace=0
    )
    job = make_job(sim, "j1")
    for i in range(5):
        make_pod(sim, job, f"p{i}", node="n1")
    # the watch keeps reading (and mapping) while nothing can be published
    rv = sim.store.resource_version
    wait_for(lambda: min(watcher.resource_versions().values()) >= rv, what="watch read on")
    # (mapped events wait in the outbox, or in the publisher thread's hands)
    assert published == [] and len(watcher.outbox) + len(handed) > 0
    # then the bounded buffer fills: back-pressure, with a warning, and nothing is dropped
    with caplog.at_level(logging.WARNING, logger="consumers.watchers.publisher"):
        for i in range(5, 100):
            make_pod(sim, job, f"p{i}", node="n1")
        wait_for(lambda: watcher.outbox.waits > 0, what="back-pressure")
        assert any("publish buffer full" in r.getMessage() for r in caplog.records)
        assert len(watcher.outbox) <= 40
        gate.set()
        rv = sim.store.resource_version
        wait_for(lambda: watcher.caught_up(rv), what="drained")
    watcher.stop()
    names = [e.data["pod_name"] for e in published if e.type == "OccupancyStarted"]
    assert names == [f"p{i}" for i in range(100)]  # in order, none lost, none twice
    ids = [e.event_id for e in published]
    assert len(ids) == len(set(ids))


def test_watchers_branch_up_down_up(databases: TemplateDatabases) -> None:
    url = databases.empty()
    engine = make_engine(url)
    try:
        upgrade(engine)
        assert "watcher_objects" in inspect(engine).get_table_names()
        downgrade(engine, "watchers@0001")
        names = set(inspect(engine).get_table_names())
        assert "watcher_objects" not in names and "events" in names
        upgrade(engine)
        assert "watcher_objects" in inspect(engine).get_table_names()
    finally:
        engine.dispose()
        databases.drop(url)
