"""The sender through a database outage: its connections terminated mid-run
(``pg_terminate_backend``), it keeps running and delivers everything, nothing lost."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest

from consumers.notifications import serve
from dlc_ledger.services.notifications import apply_rules_file, delivery_rows
from ledger.events import JobFailed
from ledger.store.postgres import PostgresEventStore
from tests.consumers.notifications.receiver import Receiver
from tests.consumers.notifications.test_delivery import SECRET, T0, _job, _rules, _setup, _submit

JOBS = 15  # below the storm summary: one message each


@pytest.fixture
def slow_receiver() -> Iterator[Receiver]:
    r = Receiver(delay=0.1)
    yield r
    r.close()


def test_terminated_connections_lose_nothing(
    store: PostgresEventStore, slow_receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LS_HOOK", SECRET)
    _setup(store)
    apply_rules_file(store, _rules(slow_receiver.url), principal="test", at=T0)
    events = []
    for i in range(JOBS):
        uid = f"o{i:02d}"
        events += [
            *_submit(uid, f"train-{i}", "ws-a", T0),
            _job(uid, JobFailed(job_uid=uid), T0 + timedelta(seconds=i), "failed"),
        ]
    store.append(events)
    stop = threading.Event()
    sender = threading.Thread(
        target=serve, args=(store, stop, lambda: T0), kwargs={"interval": 0.1}, daemon=True
    )
    sender.start()
    deadline = time.monotonic() + 30
    while len(slow_receiver.received) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    dsn = store.engine.url.render_as_string(hide_password=False).replace("+psycopg", "")
    with psycopg.connect(dsn, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert killed is not None and killed[0] >= 1
    while {r["status"] for r in delivery_rows(store, limit=100)} != {"delivered"}:
        assert sender.is_alive(), "the sender died in the outage"
        assert time.monotonic() < deadline + 30, delivery_rows(store, limit=100)
        time.sleep(0.1)
    stop.set()
    sender.join(timeout=10)
    assert len({r.headers["webhook-id"] for r in slow_receiver.received}) == JOBS
    assert len(delivery_rows(store, limit=100)) == JOBS
