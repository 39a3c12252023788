"""``dlc-ledger replay`` as a user runs it: a real process, DATABASE_URL and KAFKA_BOOTSTRAP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def _cli(url: str, bootstrap: str, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "KAFKA_BOOTSTRAP": bootstrap,
        "DLC_DATA_DIR": str(home),
    }
    return subprocess.run(
        [sys.executable, "-m", "dlc_ledger", "replay", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_replay_command_and_fresh_guard(database_url: str, bootstrap: str, tmp_path: Path) -> None:
    done = _cli(
        database_url,
        bootstrap,
        tmp_path,
        "--trace",
        "openb",
        "--format",
        "openb",
        "--limit",
        "60",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["ok"] and summary["dead_letters"] == 0 and summary["projected"]
    assert summary["occupancies_started"] == summary["expected_started"] > 0
    assert "virtual" in done.stderr and "ev/s" in done.stderr  # progress on stderr
    refused = _cli(
        database_url, bootstrap, tmp_path, "--trace", "openb", "--format", "openb", "--fresh"
    )
    assert refused.returncode == 1
    assert "--yes" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    bad = _cli(database_url, bootstrap, tmp_path, "--trace", "openb", "--format", "xyz")
    assert bad.returncode != 0
