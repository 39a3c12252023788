"""The reduced chaos replay, as CI runs it: a small openb slice replayed twice, clean and
under a dozen seeded faults (every kind at least once), each component a process of its own
on a private PostgreSQL, Tansu behind a cuttable proxy and kubesim; nothing lost, nothing
doubled, no report row different (docs/chaos.md). About 3 minutes on the 2-core machine."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chaos.faults import KINDS

# alone: the faults are timed by the wall clock, a busy machine changes what they test
pytestmark = [pytest.mark.slow, pytest.mark.alone]


@pytest.fixture(autouse=True)
def _one_chaos_run_at_a_time() -> Iterator[None]:
    """The two runs never share the machine with each other, even when a caller runs them
    under pytest-xdist (``./dev test`` runs them after the rest, one process). A file lock,
    not an xdist group: grouped scheduling keys tests by node id and would run
    schemathesis's many same-id API tests once."""
    with open(Path(tempfile.gettempdir()) / "dlc-ledger-chaos.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _chaos(
    tmp_path: Path, *args: str, timeout: float
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], str]:
    """``python -m chaos ARGS`` with its run directories in ``tmp_path``: the process, the
    JSON summary of its last line, and a detail for assertion messages."""
    done = subprocess.run(
        [sys.executable, "-m", "chaos", *args, "--workdir", str(tmp_path)],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-5000:]
    summary: dict[str, Any] = json.loads(lines[-1])
    return done, summary, f"{summary}\n{done.stderr[-6000:]}"


def test_a_dozen_faults_change_no_fact_and_no_report(server_tmp: Path) -> None:
    done, summary, detail = _chaos(
        server_tmp, "--seed", "7", "--faults", "12", "--limit", "40", "--seconds", "30",
        timeout=540,
    )  # fmt: skip
    assert "faults_injected" in summary, detail
    assert summary["faults_injected"] == 12, detail
    assert set(summary["faults_by_kind"]) == set(KINDS), detail  # every kind, at least once
    assert summary["faults_recovered"] == 12, detail
    assert summary["events_lost"] == 0, detail
    assert summary["events_doubled"] == 0, detail
    assert summary["events_extra"] == 0, detail
    assert summary["differing_rows"] == 0, detail
    assert summary["reports_compared"] > 40, detail  # the reports, every job's, every invoice's
    assert summary["facts"] > 1500, detail
    assert done.returncode == 0, detail


def test_the_closed_loop_under_faults_decides_and_bills_the_same(server_tmp: Path) -> None:
    """Jobs arrive suspended and ``dlc-ledger dispatch --clock server`` admits them, cluster
    time in lockstep with its cycles; the dispatcher killed among the faults."""
    done, summary, detail = _chaos(
        server_tmp, "--closed-loop", "--seed", "5", "--faults", "9", "--limit", "20", timeout=900
    )
    assert "kill dispatch: pid" in done.stderr, detail
    assert summary["faults_injected"] == summary["faults_recovered"] == 9, detail
    assert summary["events_lost"] == summary["events_doubled"] == 0, detail
    assert summary["events_extra"] == summary["differing_rows"] == 0, detail
    clean_cycles, chaos_cycles = summary["cycles"]
    assert clean_cycles == chaos_cycles > 20, detail  # the same instants, cycled once each
    # the dispatcher decided: its admissions are among the facts compared
    facts = json.loads((server_tmp / "clean" / "facts.json").read_text())
    assert sum(1 for f in facts if f[0] == "AdmissionDecided") >= 20, detail
    assert done.returncode == 0, detail
