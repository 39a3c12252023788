"""``dlc-ledger project``, ``projections status`` and ``projections rebuild``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from sqlalchemy import text

from ledger.events import JobSubmitted, JobSucceeded
from ledger.store.postgres import PostgresEventStore
from tests.support.builders import Narrator, at
from tests.support.clis import CliCall


def _jobs(n: Narrator, first: int, count: int) -> None:
    for i in range(first, first + count):
        n.tell(JobSubmitted(job_uid=f"u{i}", name=f"j{i}", workspace="ws"), f"job/u{i}", at(i))
        n.tell(JobSucceeded(job_uid=f"u{i}"), f"job/u{i}", at(i + 1))


def test_project_status_rebuild(store: PostgresEventStore, cli: CliCall) -> None:
    n = Narrator()
    _jobs(n, 0, 10)
    store.append(n.events)
    status = json.loads(cli("projections", "status", "--json"))
    assert {s["name"] for s in status} >= {"jobs", "occupancy", "inventory"}
    assert all(s["lag"] == 20 and s["head"] == 20 for s in status)

    assert "caught up" in cli("project", "--name", "jobs", "--page-size", "3")
    status = {s["name"]: s for s in json.loads(cli("projections", "status", "--json"))}
    assert (status["jobs"]["position"], status["jobs"]["lag"]) == (20, 0)
    assert status["occupancy"]["lag"] == 20
    out = cli("project", "--workers", "2")
    assert "lanes: quotas, billing; jobs, occupancy, budgets, inventory" in out
    assert "caught up" in out
    assert all(s["lag"] == 0 for s in json.loads(cli("projections", "status", "--json")))
    table = cli("projections", "status")
    assert "lag" in table and "jobs" in table

    before = json.loads(cli("jobs", "list", "--format", "json"))
    assert "rebuilt jobs: 20 events" in cli("projections", "rebuild", "jobs")
    assert json.loads(cli("jobs", "list", "--format", "json")) == before
    assert "no projection named" in cli("projections", "rebuild", "nope", ok=False)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_follow_tails_until_sigterm(
    store: PostgresEventStore, database_url: str, workers: str
) -> None:
    """One runner, or lanes in child processes that stop when the parent is told to."""
    env = {**os.environ, "DATABASE_URL": database_url}
    command = ["project", "--follow", "--poll-interval", "0.2", "--workers", workers]
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlc_ledger", *command],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        n = Narrator()
        _jobs(n, 0, 3)
        store.append(n.events)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with store.transaction() as uow:
                names = ("projection:jobs", "projection:quotas")
                if all(uow.load_checkpoint(name).position == 6 for name in names):
                    break
            time.sleep(0.1)
        else:
            raise AssertionError("the follower never caught up")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "stopped; checkpoints are saved" in out


def test_a_rebuild_leaves_its_tables_vacuumed_and_analyzed(
    store: PostgresEventStore, cli: CliCall
) -> None:
    n = Narrator()
    _jobs(n, 0, 10)
    store.append(n.events)
    cli("project", "--name", "jobs")
    cli("projections", "rebuild", "jobs")  # deletes the 10 rows, then writes them again
    with store.engine.connect() as conn:
        counted = conn.execute(
            text("SELECT reltuples FROM pg_class WHERE relname = 'job_state'")
        ).scalar_one()
    assert counted == 10  # -1 (never counted) until a VACUUM or ANALYZE runs
