"""Exactly-once effects: a consumer SIGKILLed at random points still stores every event once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from consumers.kafka_settings import checkpoint_name
from ledger.store.postgres import PostgresEventStore
from tests.support.kafka import make_events, produce, stored_ids, streams_in_order

EVENTS = 50_000
KILLS = 10


def start_consumer(
    database_url: str, bootstrap: str, topic: str, group: str, log: Path
) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable,
        "-m",
        "dlc_ledger.cli.ingest",
        "--database-url",
        database_url,
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--group",
        group,
        "--max-poll-records",
        "500",
        "--session-timeout-ms",
        "2000",
    ]
    with log.open("ab") as out:
        return subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        )


def wait_for(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_sigkill_at_random_points_stores_every_event_exactly_once(
    store: PostgresEventStore, database_url: str, bootstrap: str, topic: str, tmp_path: Path
) -> None:
    rng = random.Random(20261101)
    events = make_events(EVENTS, streams=500)
    produce(bootstrap, topic, events)
    group = f"g-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "consumer.log"

    kills = 0
    while kills < KILLS:
        before = store.head_position()
        assert before < EVENTS, f"all events stored after only {kills} kills"
        proc = start_consumer(database_url, bootstrap, topic, group, log)
        try:
            # kill somewhere after the first committed batch, mid-stream
            progressed = wait_for(lambda b=before: store.head_position() > b, 60)
            if not progressed:
                proc.send_signal(signal.SIGABRT)  # faulthandler dumps every thread's stack
                proc.wait()
                raise AssertionError("consumer made no progress:\n" + log.read_text()[-6000:])
            time.sleep(rng.uniform(0.0, 0.35))
        finally:
            proc.kill()
            proc.wait()
        kills += 1

    proc = start_consumer(database_url, bootstrap, topic, group, log)
    try:
        assert wait_for(lambda: store.head_position() >= EVENTS, 120), "not all events stored"
        time.sleep(0.5)  # anything extra would show up now
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()[-3000:]

    ids = stored_ids(store)
    assert len(ids) == EVENTS
    assert set(ids) == {e.event_id for e in events}
    for stream, sequence in streams_in_order(store).items():
        assert sequence == sorted(sequence), stream
    with store.transaction() as uow:
        offsets = uow.load_checkpoint(checkpoint_name(group)).offsets
    assert sum(offsets.values()) == EVENTS
    assert store.verify().ok
