"""The dispatcher lease on PostgreSQL: lost with its session, refused to a single cycle
while another instance holds it (the real CLI, its own process)."""

from __future__ import annotations

import threading

from sqlalchemy import text

from consumers.dispatcher import LEASE_NAME, run_dispatcher
from ledger.store.postgres import PostgresEventStore
from tests.support.clis import cli_process
from tests.support.live import Live


def test_a_lease_whose_session_ends_is_lost_and_free_again(store: PostgresEventStore) -> None:
    lease = store.try_lease(LEASE_NAME)
    assert lease is not None and lease.alive()
    with store.engine.begin() as conn:
        killed = conn.execute(
            text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = 'dlc-ledger lease dispatcher' "
                "AND datname = current_database()"
            )
        ).scalar()
    assert killed == 1
    assert not lease.alive()
    again = store.try_lease(LEASE_NAME)
    assert again is not None
    again.release()
    lease.release()  # of a dead session: nothing to do, no error


def test_a_single_cycle_does_not_wait_for_a_held_lease(live: Live, database_url: str) -> None:
    held = live.store.try_lease(LEASE_NAME)
    assert held is not None
    try:
        done = cli_process(database_url, "dispatch", "--server", live.sim.url, timeout=60)
        assert done.returncode == 3, done.stderr
        assert "another dispatcher holds the lease" in done.stderr
        assert live.decisions() == []
    finally:
        held.release()
    live.submit("a1", "ws-a", 1)
    live.project()
    done = cli_process(database_url, "dispatch", "--server", live.sim.url, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("cycle at ") and "admitted 1" in done.stdout


def test_the_runner_waits_for_the_lease_then_cycles(live: Live) -> None:
    held = live.store.try_lease(LEASE_NAME)
    assert held is not None
    stop = threading.Event()
    seen: list[object] = []
    runner = threading.Thread(
        target=run_dispatcher,
        args=(live.dispatcher, live.store),
        kwargs={
            "follow": True,
            "interval": 0.05,
            "stop": stop,
            "on_cycle": seen.append,
            "lease_poll": 0.05,
        },
    )
    runner.start()
    try:
        assert not stop.wait(0.5) and seen == []  # waiting: no cycle while held
        held.release()
        for _ in range(200):
            if seen:
                break
            stop.wait(0.05)
        assert seen
    finally:
        stop.set()
        runner.join(10)
    assert not runner.is_alive()
    mine = live.store.try_lease(LEASE_NAME)  # released on the way out
    assert mine is not None
    mine.release()
