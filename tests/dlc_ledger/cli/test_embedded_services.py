"""Embedded services: a read command never creates a data dir, ``db stop`` / ``broker stop``
stop what the demo started, ``db status`` explains the migration branches."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dlc_ledger.wiring.broker import EmbeddedBroker


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dlc_ledger", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def _embedded_env(data_dir: Path) -> dict[str, str]:
    env = {**os.environ, "DLC_DATA_DIR": str(data_dir)}
    env.pop("DATABASE_URL", None)
    env.pop("KAFKA_BOOTSTRAP", None)
    return env


@pytest.mark.parametrize(
    "command",
    [
        ("jobs", "list"),
        ("report", "usage"),
        ("invoices", "list"),
        ("quotas", "list"),
        ("prices", "list"),
        ("db", "status"),
        ("verify",),
    ],
)
def test_a_read_command_on_a_missing_data_dir_fails_and_creates_nothing(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    typo = tmp_path / "dlc-ledgr"
    done = _cli(_embedded_env(typo), *command)
    assert done.returncode == 1, done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert f"DLC_DATA_DIR {typo} does not exist" in line and "db upgrade" in line
    assert not typo.exists()
    assert done.stdout == ""


def test_db_upgrade_creates_and_db_stop_stops_the_embedded_database(server_tmp: Path) -> None:
    env = _embedded_env(server_tmp / "home")
    try:
        assert _cli(env, "db", "upgrade").returncode == 0
        status = _cli(env, "db", "status")
        assert status.returncode == 0, status.stderr
        assert "independent migration branches" in status.stdout and "up to date" in status.stdout
        assert "  quotas " in status.stdout
        stopped = _cli(env, "db", "stop")
        assert stopped.returncode == 0, stopped.stderr
        assert stopped.stdout.startswith("stopped the embedded PostgreSQL")
        assert _cli(env, "db", "stop").stdout.strip() == "not running"
        # an existing (stopped) database is started again by a read command
        assert _cli(env, "jobs", "list").stdout.strip() == "(no rows)"
    finally:
        _cli(env, "db", "stop")


def test_broker_stop_finds_the_broker_of_the_configured_data_dir(tmp_path: Path) -> None:
    """The demo's broker lives in the configured data dir, DLC_CONFIG's included."""
    home = tmp_path / "home"
    config = tmp_path / "config.yaml"
    config.write_text(f"data_dir: {home}\n")
    env = {**os.environ, "DLC_CONFIG": str(config)}
    for name in ("DATABASE_URL", "KAFKA_BOOTSTRAP", "DLC_DATA_DIR"):
        env.pop(name, None)
    broker = EmbeddedBroker(home / "broker")
    try:
        broker.start()
        done = _cli(env, "broker", "stop")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "stopped"
        assert not broker.status().running
    finally:
        broker.stop()


def test_db_status_names_the_branches(database_url: str) -> None:
    done = _cli({**os.environ, "DATABASE_URL": database_url}, "db", "status")
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("revision: ")
    assert "(the heads of 10 independent migration branches" in first and "up to date" in first
    labels = [line.split()[0] for line in done.stdout.splitlines()[1:11]]
    assert labels == [
        "billing",
        "budgets",
        "dispatch",
        "extent",
        "jobs",
        "notifications",
        "quotas",
        "store",
        "tokens",
        "watchers",
    ]
