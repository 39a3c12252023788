"""``dlc-ledger up`` as a user runs it: a real process on a fresh database with the embedded
broker and kubesim replaying a small slice of openb fast, read through its printed URL and
token, then stopped with Ctrl-C (SIGINT to its process group, as a terminal sends it). Each part
connects as its role's login, as ``pg_stat_activity`` shows: on a configured server with
``DATABASE_URL_READER`` / ``_WRITER``, and on the embedded database with its own logins."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text
from sqlalchemy.engine import make_url

from dlc_ledger.cli.app import main
from dlc_ledger.wiring import context
from dlc_ledger.wiring.broker import EmbeddedBroker, free_port
from dlc_ledger.wiring.embedded_postgres import embedded_database_url, stop_embedded
from ledger.store.engines import make_engine
from ledger.store.roles import READER_LOGIN, READER_ROLE, WRITER_LOGIN, WRITER_ROLE
from tests.support.api import QUOTA_TREE
from tests.support.databases import ADMIN_URL, TemplateDatabases
from tests.support.processes import database_sessions, get, group_processes, interrupt, running_up

#: what every part of up names itself in pg_stat_activity (application_name
#: ``dlc-ledger-<part>``; the dispatcher's lease holds a session of its own)
PARTS = {"api", "api-writes", "ingest", "watcher", "projector", "billing", "notifications",
         "dispatcher", "up", "dlc-ledger lease dispatcher"}  # fmt: skip


def _scrape(url: str, token: str) -> dict[str, float]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read().decode()
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


@contextmanager
def _logins() -> Iterator[tuple[str, str]]:
    """A reader and a writer LOGIN role on the test server, as an operator makes them
    (docs/store.md); dropped after."""
    suffix = uuid.uuid4().hex[:8]
    names = (f"t_api_{suffix}", f"t_service_{suffix}")
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        for name, group in zip(names, (READER_ROLE, WRITER_ROLE), strict=True):
            conn.execute(f"CREATE ROLE {name} LOGIN IN ROLE {group}")
    try:
        yield names
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            for name in names:
                conn.execute(f"DROP ROLE IF EXISTS {name}")


def _as(url: str, login: str) -> str:
    return make_url(url).set(username=login).render_as_string(hide_password=False)


def _logins_by_part(url: str) -> dict[str, set[str]]:
    """Which logins each part of up connects as (every session on the database is a named
    part: the test's own query aside, nothing else uses it)."""
    found: dict[str, set[str]] = defaultdict(set)
    for login, name in database_sessions(url):
        assert name.startswith("dlc-ledger"), (login, name)  # unnamed: not a part of up
        found[name.removeprefix("dlc-ledger-")].add(login)
    assert set(found) <= PARTS, found
    return dict(found)


def _send(method: str, url: str, token: str, body: object) -> tuple[int, str]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_up_serves_a_live_replay_and_stops_on_ctrl_c(
    databases: TemplateDatabases, tmp_path: Path
) -> None:
    url = databases.empty()  # up migrates it itself, as DATABASE_URL's login (the owner)
    with _logins() as (reader, writer):
        _serve_a_live_replay(databases, url, reader, writer, tmp_path)


def _serve_a_live_replay(
    databases: TemplateDatabases, url: str, reader: str, writer: str, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DATABASE_URL_READER": _as(url, reader),
        "DATABASE_URL_WRITER": _as(url, writer),
        "DLC_DATA_DIR": str(tmp_path),
    }
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

            assert get(f"{up.url}/metrics")[0] == 401  # a bearer with admin or metrics only
            metrics = _scrape(f"{up.url}/metrics", up.token)
            # one registry: every component's figures on the API's /metrics
            assert metrics["dlc_ingest_events_total"] > 0
            assert metrics["dlc_watcher_events_total"] > 0
            assert "dlc_projector_positions_total" in metrics
            assert metrics.get("dlc_api_requests_total", 0) > 0
            deadline = time.monotonic() + 20
            while "dlc_quota_resource_usage" not in metrics:  # the dispatcher's first cycle
                assert time.monotonic() < deadline, sorted(metrics)
                time.sleep(0.5)
                metrics = _scrape(f"{up.url}/metrics", up.token)

            # each part as its role's login; none as the owner, who only migrated
            parts = _logins_by_part(url)
            assert parts["api"] == {reader}, parts
            for part in ("ingest", "projector", "billing", "notifications", "dispatcher", "up",
                         "dlc-ledger lease dispatcher"):  # fmt: skip
                assert parts[part] == {writer}, (part, parts)
            assert "every part connects as" not in "".join(up.errors)
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
            # DATABASE_URL alone: every part as its login, named, and up says so
            login = make_url(database_url).username
            parts = _logins_by_part(database_url)
            assert {"api", "ingest", "watcher", "projector", "dispatcher"} <= set(parts), parts
            assert set().union(*parts.values()) == {login}, parts
            assert interrupt(up) < 20
            assert f"note: every part connects as {login!r} (DATABASE_URL)" in up.stderr()
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


def test_up_on_the_embedded_database_runs_each_part_as_its_own_login(server_tmp: Path) -> None:
    """No DATABASE_URL: the embedded server's logins, made by up itself, the API's writes on
    the writer's; the superuser (the owner) only migrated."""
    data_dir = server_tmp / "data"
    env = {**os.environ, "DLC_DATA_DIR": str(data_dir)}
    for name in ("DATABASE_URL", "DATABASE_URL_READER", "DATABASE_URL_WRITER", "KAFKA_BOOTSTRAP"):
        env.pop(name, None)
    quotas = server_tmp / "quotas.yaml"
    quotas.write_text(QUOTA_TREE)
    try:
        # the owner creates and migrates it, a writer's login applies the tree (ws-a known)
        for command in (["db", "upgrade"], ["quotas", "apply", str(quotas)]):
            done = subprocess.run(
                [sys.executable, "-m", "dlc_ledger", *command],
                capture_output=True, text=True, env=env, timeout=120,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
        with running_up(env, "up", "--port", "0", "--no-replay") as up:
            status, me = get(f"{up.url}/v1/whoami", up.token)
            assert status == 200 and me["roles"] == ["admin"]
            rule = {
                "events": ["JobStarted"],
                "target": {"webhook": "http://127.0.0.1:9/hook", "secret_env": "HOOK"},
            }
            granted = _send("PUT", f"{up.url}/v1/notifications/secrets/ws-a/HOOK", up.token, {})
            assert granted[0] == 200, granted
            put = f"{up.url}/v1/notifications/rules/ws-a/started"
            written = _send("PUT", put, up.token, rule)  # a write: on the writer's login
            assert written[0] == 201, written
            status, rules = get(f"{up.url}/v1/notifications/rules", up.token)
            assert status == 200 and [r["name"] for r in rules["items"]] == ["started"]
            owner = embedded_database_url(data_dir)
            parts = _logins_by_part(owner)
            assert parts["api"] == {READER_LOGIN}, parts
            assert parts["api-writes"] == {WRITER_LOGIN}, parts
            for part in ("projector", "billing", "notifications", "up"):
                assert parts[part] == {WRITER_LOGIN}, (part, parts)
            assert "connects as" not in "".join(up.errors)
            assert interrupt(up) < 20
        # PostgreSQL 17+: a writer may vacuum what it rewrites (projections rebuild), not events
        plain = make_url(owner).set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(plain) as conn:
            may = "SELECT has_table_privilege(%s, %s, 'MAINTAIN')"
            assert conn.execute(may, (WRITER_ROLE, "checkpoints")).fetchone() == (True,)
            assert conn.execute(may, (WRITER_ROLE, "events")).fetchone() == (False,)
            assert conn.execute(may, (READER_ROLE, "checkpoints")).fetchone() == (False,)
        for login in (READER_LOGIN, WRITER_LOGIN):  # generated, owner-only
            assert (data_dir / f"{login}.password").stat().st_mode & 0o777 == 0o600
    finally:
        stop_embedded(data_dir)


def _pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _embedded_pids(data_dir: Path) -> tuple[int | None, int | None]:
    """(postmaster pid, Tansu pid) of the data dir's embedded services, None when not running."""
    postmaster = data_dir / "postgres" / "postmaster.pid"
    pg = int(postmaster.read_text().split()[0]) if postmaster.exists() else None
    broker = EmbeddedBroker(data_dir / "broker").status()
    return (
        pg if pg is not None and _pid_alive(pg) else None,
        broker.pid if broker.running else None,
    )


def test_up_stops_the_embedded_services_it_started_and_only_those(server_tmp: Path) -> None:
    """What up starts it stops (the embedded PostgreSQL and Tansu, by pid); with
    --keep-services it leaves them; ones already running before up are left running."""
    data_dir = server_tmp / "data"
    env = {**os.environ, "DLC_DATA_DIR": str(data_dir)}
    for name in ("DATABASE_URL", "DATABASE_URL_READER", "DATABASE_URL_WRITER", "KAFKA_BOOTSTRAP",
                 "KUBECONFIG"):  # fmt: skip
        env.pop(name, None)
    replay = ("up", "--port", "0", "--limit", "5", "--speed", "200000")
    try:
        # nothing running: up starts both, and Ctrl-C leaves neither behind
        with running_up(env, *replay) as up:
            pg, tansu = _embedded_pids(data_dir)
            assert pg is not None and tansu is not None
            assert interrupt(up) < 30
        assert not _pid_alive(pg) and not _pid_alive(tansu)
        assert _embedded_pids(data_dir) == (None, None)
        errors = up.stderr()
        assert "stopped the embedded broker up started" in errors
        assert "stopped the embedded PostgreSQL up started" in errors

        # --keep-services: what it started stays
        with running_up(env, *replay, "--keep-services") as up:
            started = _embedded_pids(data_dir)
            assert interrupt(up) < 30
        assert _embedded_pids(data_dir) == started and None not in started

        # both running before up (as the last run left them): up leaves them running
        with running_up(env, *replay) as up:
            assert _embedded_pids(data_dir) == started
            assert interrupt(up) < 30
        assert _embedded_pids(data_dir) == started
        assert "stopped the embedded" not in up.stderr()
    finally:
        EmbeddedBroker(data_dir / "broker").stop()
        if (data_dir / "postgres" / "PG_VERSION").exists():
            stop_embedded(data_dir)
