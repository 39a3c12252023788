"""The real long-running commands serve ``/metrics`` on ``--metrics-port``: a
``dispatch --follow`` process with a job that cannot fit reports it pending, a
``project --follow`` process reports every projection caught up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.live import Live
from tests.support.metrics import Scrape, free_port, scrape


@contextmanager
def _process(url: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlc_ledger", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "DATABASE_URL": url},
    )
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


def _scrape_until(
    proc: subprocess.Popen[str], metrics: str, ready: str, timeout: float = 60
) -> Scrape:
    """Scrape until a sample named ``ready`` is served (the process is up and worked)."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        try:
            found = scrape(metrics)
            if any(name == ready for name, _ in found):
                return found
        except (urllib.error.URLError, ConnectionError):
            pass  # not listening yet
        assert time.monotonic() < deadline, f"no {ready} served"
        time.sleep(0.1)


def test_dispatch_follow_serves_pending_workloads(live: Live, database_url: str) -> None:
    live.submit("b1", "ws-b", 5)  # more than the whole tree: pending for ever
    live.project()
    port = free_port()
    with _process(
        database_url,
        "dispatch",
        "--follow",
        "--interval",
        "0.2",
        "--server",
        live.sim.url,
        "--metrics-port",
        str(port),
    ) as proc:
        found = _scrape_until(proc, f"http://127.0.0.1:{port}/metrics", "dlc_pending_workloads")
    assert found[("dlc_pending_workloads", (("quota", "team-b"),))] == 1
    assert found[("dlc_pending_workloads", (("quota", "team-a"),))] == 0
    assert found[("dlc_dispatch_decisions_total", (("outcome", "pending"),))] >= 1
    assert found[("dlc_dispatch_decision_seconds_count", ())] >= 1
    nominal = ("dlc_quota_nominal_quota", (("quota", "root"), ("resource", "gpu/any")))
    assert found[nominal] == 4000


def test_project_follow_serves_the_lag_per_projection(live: Live, database_url: str) -> None:
    live.submit("a1", "ws-a", 1)
    live.project()  # the watcher's events are stored (and projected once here)
    port = free_port()
    with _process(database_url, "project", "--follow", "--metrics-port", str(port)) as proc:
        found = _scrape_until(proc, f"http://127.0.0.1:{port}/metrics", "dlc_projection_lag_events")
    lags = {
        dict(labels)["projection"]: v
        for (n, labels), v in found.items()
        if n.endswith("lag_events")
    }
    assert "jobs" in lags and set(lags.values()) == {0}


def test_metrics_port_needs_follow_and_one_worker(live: Live, database_url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dlc_ledger", "project", "--metrics-port", "9999"],
        capture_output=True,
        text=True,
        env={**os.environ, "DATABASE_URL": database_url},
        timeout=60,
    )
    assert done.returncode != 0 and "--metrics-port" in done.stderr


def test_notifications_send_serves_its_rounds(database_url: str) -> None:
    port = free_port()
    with _process(database_url, "notifications", "send", "--interval", "0.2",
                  "--metrics-port", str(port)) as proc:  # fmt: skip
        found = _scrape_until(
            proc, f"http://127.0.0.1:{port}/metrics", "dlc_notifications_rounds_total"
        )
        while found[("dlc_notifications_rounds_total", ())] < 2:  # it goes round
            found = _scrape_until(
                proc, f"http://127.0.0.1:{port}/metrics", "dlc_notifications_rounds_total"
            )
    assert found[("dlc_notifications_delivered_total", ())] == 0
    assert found[("dlc_notifications_last_round_timestamp_seconds", ())] > time.time() - 60
