"""``dlc-ledger up`` as a user runs it: a real process on a fresh database with the embedded
broker and kubesim replaying a small slice of openb fast, read through its printed URL and
token, then stopped with Ctrl-C (SIGINT to its process group, as a terminal sends it)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from dlc_ledger.cli.app import main
from dlc_ledger.wiring import context
from dlc_ledger.wiring.broker import EmbeddedBroker, free_port
from ledger.store.engines import make_engine
from tests.databases import TemplateDatabases
from tests.up.processes import get, group_processes, interrupt, running_up


def _scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=10) as response:  # follows /metrics -> /metrics/
        body = response.read().decode()
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


def test_up_serves_a_live_replay_and_stops_on_ctrl_c(
    databases: TemplateDatabases, tmp_path: Path
) -> None:
    url = databases.empty()  # up migrates it itself
    env = {**os.environ, "DATABASE_URL": url, "DLC_DATA_DIR": str(tmp_path)}
    env.pop("KAFKA_BOOTSTRAP", None)  # the embedded broker
    env.pop("KUBECONFIG", None)  # kubesim
    try:
        with running_up(
            env, "up", "--port", "0", "--limit", "60", "--speed", "200000",
            "--billing-interval", "1", "--dispatch-interval", "0.5",
        ) as up:  # fmt: skip
            printed = "".join(up.printed)
            for part in ("kubesim, watcher and ingest", "projector", "billing", "dispatcher"):
                assert part in printed
            assert f"dashboard: {up.url}/" in printed
            assert re.search(r"kubesim:\s+http://127\.0\.0\.1:\d+", printed)

            status, me = get(f"{up.url}/v1/whoami", up.token)
            assert status == 200 and me["name"] == "up-admin" and me["roles"] == ["admin"]
            assert get(f"{up.url}/v1/whoami")[0] == 401

            # ingest -> store -> projection, live: jobs appear while up runs
            deadline = time.monotonic() + 45
            jobs: list[dict[str, Any]] = []
            while not jobs:
                assert time.monotonic() < deadline, "no job projected within 45 s"
                status, page = get(f"{up.url}/v1/jobs?limit=50", up.token)
                assert status == 200
                jobs = page["items"]
                time.sleep(0.5)
            assert all(job["name"].startswith("openb-pod-") for job in jobs)

            metrics = _scrape(f"{up.url}/metrics")
            # one registry: every component's figures on the API's /metrics
            assert metrics["dlc_ingest_events_total"] > 0
            assert metrics["dlc_watcher_events_total"] > 0
            assert "dlc_projector_positions_total" in metrics
            assert metrics.get("dlc_api_requests_total", 0) > 0
            deadline = time.monotonic() + 20
            while "dlc_quota_resource_usage" not in metrics:  # the dispatcher's first cycle
                assert time.monotonic() < deadline, sorted(metrics)
                time.sleep(0.5)
                metrics = _scrape(f"{up.url}/metrics")
            assert interrupt(up) < 20
            first_token = up.token

        # the run's token was revoked when it stopped
        engine = make_engine(url)
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT revoked_at IS NOT NULL FROM api_tokens WHERE name = 'up-admin'")
            ).all()
        engine.dispose()
        assert rows == [(True,)]

        # --no-replay serves what is stored: no broker, no cluster
        with running_up(env, "up", "--port", "0", "--no-replay") as again:
            assert "kubesim" not in "".join(again.printed)
            status, page = get(f"{again.url}/v1/jobs?limit=50", again.token)
            assert status == 200 and page["items"]
            assert get(f"{again.url}/v1/whoami", first_token)[0] == 401
            assert interrupt(again, signal.SIGTERM) < 20
    finally:
        EmbeddedBroker(tmp_path / "broker").stop()
        databases.drop(url)


def test_up_watches_the_cluster_a_kubeconfig_names(database_url: str, tmp_path: Path) -> None:
    """With a kubeconfig (here one for a kubesim of its own, as for any cluster) up runs
    the watchers and the ingest group on it, and the dispatcher only when asked."""
    kubeconfig = tmp_path / "kubeconfig.yaml"
    sim = subprocess.Popen(
        [sys.executable, "-m", "kubesim", "--trace", "openb", "--limit", "20",
         "--speed", "200000", "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    env = {**os.environ, "DATABASE_URL": database_url, "DLC_DATA_DIR": str(tmp_path)}
    env.pop("KAFKA_BOOTSTRAP", None)
    try:
        assert sim.stdout is not None
        while not kubeconfig.exists() or "kubeconfig written" not in sim.stdout.readline():
            assert sim.poll() is None, "kubesim exited"
        with running_up(
            env, "up", "--port", "0", "--kubeconfig", str(kubeconfig), "--dispatch",
            "--dispatch-interval", "0.5",
        ) as up:  # fmt: skip
            printed = "".join(up.printed)
            assert (
                "running ingest, watcher, projector, billing, notifications, dispatcher, api"
                in printed
            )
            assert "kubesim:" not in printed  # nothing of its own: the cluster is given
            deadline = time.monotonic() + 45
            while not get(f"{up.url}/v1/jobs?limit=5", up.token)[1]["items"]:
                assert time.monotonic() < deadline, "no job projected within 45 s"
                time.sleep(0.5)
            assert interrupt(up) < 20
    finally:
        sim.terminate()
        sim.wait(10)
        EmbeddedBroker(tmp_path / "broker").stop()


def test_a_part_that_dies_stops_up_and_is_named(
    databases: TemplateDatabases, tmp_path: Path
) -> None:
    url = databases.clone()
    env = {**os.environ, "DATABASE_URL": url, "DLC_DATA_DIR": str(tmp_path)}
    with running_up(env, "up", "--port", "0", "--no-replay") as up:
        started = time.monotonic()
        databases.drop(url)  # WITH (FORCE): every connection of up is cut
        assert up.proc.wait(timeout=30) == 69  # a part failed: unavailable (docs/CONVENTIONS.md)
        assert time.monotonic() - started < 20
    errors = up.stderr()
    assert re.search(r"dlc-ledger: error: (projector|billing|api) failed: ", errors), errors
    assert "Traceback" not in errors
    assert group_processes(up.proc.pid) == []


def _run_up(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "dlc_ledger", "up", "--port", "0", *args],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    return done, time.monotonic() - started


def test_an_unreachable_database_stops_up_at_once_with_a_clear_error(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": f"postgresql://root@127.0.0.1:{free_port()}/nowhere",
        "DLC_DATA_DIR": str(tmp_path),
    }
    done, took = _run_up(env)
    assert done.returncode == 69, done.stderr  # unavailable
    assert "dlc-ledger: error: database unreachable" in done.stderr
    assert "Traceback" not in done.stderr
    assert took < 20


def test_an_unreachable_broker_stops_up_with_its_address(database_url: str, tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DLC_DATA_DIR": str(tmp_path),
        "KAFKA_BOOTSTRAP": f"127.0.0.1:{port}",
    }
    done, took = _run_up(env, "--limit", "5")
    assert done.returncode == 69, done.stderr  # unavailable
    assert f"no Kafka broker answered at 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr
    assert took < 25


def test_a_port_in_use_is_refused_before_anything_starts(database_url: str, tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "DATABASE_URL": database_url, "DLC_DATA_DIR": str(tmp_path)}
        done = subprocess.run(
            [sys.executable, "-m", "dlc_ledger", "up", "--port", str(port), "--no-replay"],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr


@pytest.mark.parametrize(
    "bad",
    [
        ["--speed", "0"],
        ["--trace", "x.csv"],
        ["--port", "70000"],
        ["--no-replay", "--trace", "openb"],  # a replay's option where nothing is replayed
        ["--no-replay", "--limit", "10"],
    ],
)
def test_bad_options_are_usage_errors(
    bad: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # in-process; were an option let through, the unreachable database would end it (1)
    monkeypatch.setenv("DATABASE_URL", f"postgresql://root@127.0.0.1:{free_port()}/nowhere")
    context.settings.cache_clear()
    try:
        assert main(["up", "--port", "0", *bad]) == 2
    finally:
        context.settings.cache_clear()
    err = capsys.readouterr().err
    assert bad[-2] in err if bad[0] == "--no-replay" else bad[0] in err
