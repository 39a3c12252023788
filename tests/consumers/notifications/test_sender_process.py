"""The sender as deployed: ``dlc-ledger notifications send`` in its own process, killed
with SIGKILL mid-batch and started again, loses nothing (at least once, the same
``webhook-id`` for a notification sent again)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta

import pytest

from consumers.notifications.sender import SEND_BATCH
from dlc_ledger.services.notifications import apply_rules_file, delivery_rows
from ledger.events import JobFailed
from ledger.store.postgres import PostgresEventStore
from tests.consumers.notifications.receiver import Receiver
from tests.consumers.notifications.test_delivery import SECRET, T0, _job, _rules, _setup, _submit

JOBS = 20


@pytest.fixture
def slow_receiver() -> Iterator[Receiver]:
    r = Receiver(delay=0.3)
    yield r
    r.close()


def _send(url: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "DATABASE_URL": url, "LS_HOOK": SECRET}
    return subprocess.Popen(
        [sys.executable, "-m", "dlc_ledger", "notifications", "send", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def test_sigkill_mid_batch_loses_nothing(
    store: PostgresEventStore, database_url: str, slow_receiver: Receiver
) -> None:
    _setup(store)
    apply_rules_file(store, _rules(slow_receiver.url), principal="test", at=T0)
    events = []
    for i in range(JOBS):
        uid = f"j{i:02d}"
        events += [
            *_submit(uid, f"train-{i}", "ws-a", T0),
            _job(uid, JobFailed(job_uid=uid), T0 + timedelta(seconds=i), "failed"),
        ]
    store.append(events)
    sender = _send(database_url, "--interval", "0.1")
    deadline = time.monotonic() + 60
    while len(slow_receiver.received) < 4:
        assert sender.poll() is None, sender.communicate()
        assert time.monotonic() < deadline, "the sender delivered nothing"
        time.sleep(0.05)
    os.killpg(sender.pid, signal.SIGKILL)  # mid-batch: one request may be in flight
    sender.wait(timeout=10)
    before = len(slow_receiver.received)
    assert before < JOBS
    finish = _send(database_url, "--until-idle")
    _, err = finish.communicate(timeout=120)
    assert finish.returncode == 0, err
    ids = Counter(r.headers["webhook-id"] for r in slow_receiver.received)
    assert len(ids) == JOBS  # every notification arrived
    # at least once: what the killed sender had sent but not committed goes again (at most
    # one batch), each with the id it had, so a receiver drops the repeats
    assert sum(ids.values()) - JOBS <= SEND_BATCH and max(ids.values()) <= 2
    rows = delivery_rows(store, limit=1000)
    assert len(rows) == JOBS and {r["status"] for r in rows} == {"delivered"}
    assert len(store.read_by_type(["NotificationDelivered"], limit=1000)) == JOBS


def test_one_tenant_s_hostile_receiver_never_stops_the_sender(
    store: PostgresEventStore, database_url: str
) -> None:
    """Before: ``Retry-After: 99999999999999`` raised OverflowError out of the sender's
    retry arithmetic and stopped the process, on every restart. Now the wait is capped,
    the other tenant's rule is delivered and the process keeps going round."""
    hostile = Receiver(answers=[503] * 1000, retry_after="99999999999999")
    friendly = Receiver()
    try:
        _setup(store)
        two = _rules(hostile.url) + _rules(friendly.url).split("rules:")[1].replace(
            "name: failures", "name: friendly"
        )
        apply_rules_file(store, two, principal="test", at=T0)
        store.append(
            [*_submit("j1", "train-1", "ws-a", T0), _job("j1", JobFailed(job_uid="j1"), T0, "f")]
        )
        sender = _send(database_url, "--interval", "0.1")
        try:
            deadline = time.monotonic() + 60
            while not friendly.received or not hostile.received:
                assert sender.poll() is None, sender.communicate()
                assert time.monotonic() < deadline, "nothing was delivered"
                time.sleep(0.05)
            time.sleep(1.0)  # rounds after the hostile answer
            assert sender.poll() is None, sender.communicate()
        finally:
            os.killpg(sender.pid, signal.SIGTERM)
            sender.wait(timeout=20)
        (row,) = [r for r in delivery_rows(store) if r["rule"] == "ws-a/failures"]
        assert row["status"] == "queued" and row["last_error"] == "HTTP 5xx"
        assert row["next_attempt_at"] <= row["queued_at"] + timedelta(hours=1, minutes=1)
    finally:
        hostile.close()
        friendly.close()
