"""The README's main job, as a user runs it: ``dlc-ledger demo`` in a real process.

It replays the whole openb trace through kubesim, the watchers, a real Tansu
broker and PostgreSQL, checked exact, then twelve live hours in the same world under the
dispatcher (a window's training played again while an inference service scales), bills it
all and prints the reports and the what-if table; every read after it reads that one
world. Running it again adds nothing to the store; the second run adds a FIFO what-if.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlc_ledger.wiring.broker import EmbeddedBroker, free_port
from dlc_ledger.wiring.runs import run_url
from tests.support.databases import TemplateDatabases
from tests.support.processes import get, interrupt, running_up


def _table(out: str, heading: str) -> list[list[str]]:
    """The rows of the table printed under ``heading`` (cells split on 2+ spaces)."""
    lines = out.split(heading, 1)[1].splitlines()[3:]  # heading, underline, header, rule
    rows = []
    for line in lines[1:]:
        if not line.strip():
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return rows


def _what_if(out: str, schedules: set[str]) -> None:
    """The what-if table: every quota under every schedule, the same jobs in each; the
    live hours waited and preempted."""
    rows = _table(out, "What if: the trace's own schedule vs DLC Ledger's dispatcher")
    by_quota: dict[str, dict[str, list[str]]] = {}
    for row in rows:
        by_quota.setdefault(row[0], {})[row[1]] = row
    assert {"be", "ls", "(all)"} <= set(by_quota), rows
    for quota, found in by_quota.items():
        assert set(found) == schedules, (quota, found)
        assert len({r[2] for r in found.values()}) == 1, (quota, found)  # jobs agree
    assert by_quota["(all)"]["dispatcher"][9] != "0"  # preemptions
    waits = _table(out, "Live hours: waits by quota and priority")
    assert waits and all(int(r[2]) > 0 for r in waits)
    preemptions = _table(out, "Live hours: preemptions")
    # the inference service's scale-ups reclaim what training borrowed
    assert any(r[1] == "app-151-live" and r[2] == "inference" for r in preemptions), preemptions
    # how the estimates held is said, with its figures (measured: 1 of 8 inside, 12 %)
    held = re.search(
        r"of (\d+) waits with a stated start range .*?, the job started inside it for (\d+) "
        r"\((\d+)%\)",
        out,
    )
    assert held, out[-1500:]
    assert int(held.group(2)) <= int(held.group(1))


def _subscriptions_add_up(out: str) -> None:
    """The utilisation table against the occupancy figures of the same run: what the
    groups' own quotas used is the prepaid (quota-mode) GPU-hours, what they lent is the
    idle-mode GPU-hours; the refund and the renewals are on the invoices."""
    usage = {
        (r[0], r[1]): float(r[2].replace(",", ""))
        for r in _table(out, "by workspace and billing mode")
    }
    groups = _table(out, "Are we using what we pay for?")
    used = sum(float(r[2]) + float(r[6]) for r in groups)  # used + over
    lent = sum(float(r[3]) for r in groups)
    prepaid = sum(v for (_, mode), v in usage.items() if mode == "quota")
    assert abs(used - prepaid) < 0.5, (used, prepaid)
    assert abs(lent - usage[("ws-be", "idle")]) < 0.5, (lent, usage)
    assert "refund of sub-" in out and "renewal sub-" in out
    assert re.search(r"gpu-v100m32 .* cancelled .* 8,100\.00", out)


@pytest.mark.slow
def test_demo_end_to_end_and_idempotent(databases: TemplateDatabases, tmp_path: Path) -> None:
    url = databases.empty()  # the demo migrates it itself
    env = {**os.environ, "DATABASE_URL": url, "DLC_DATA_DIR": str(tmp_path)}
    env.pop("KAFKA_BOOTSTRAP", None)  # the demo starts its own embedded broker
    try:
        first = subprocess.run(
            [sys.executable, "-m", "dlc_ledger", "demo"],
            capture_output=True, text=True, env=env, timeout=900,
        )  # fmt: skip
        assert first.returncode == 0, first.stderr[-3000:]
        out = first.stdout
        assert "replayed 8,152 pods on 1,523 nodes" in out
        assert "7,255 occupancies, 0 dead letters" in out
        for section in (
            "GPU-hours and cost by workspace and billing mode",
            "Top quotas by GPU usage",
            "Audit trail: one invoice line back to the Kubernetes events",
        ):
            assert section in out
        for workspace in ("ws-ls", "ws-be", "ws-burstable", "ws-guaranteed"):
            assert workspace in out
        assert re.search(r"<- OccupancyStarted at .* pod openb-pod-\d{4}-0 on node", out)
        # usage reaches the leaf quotas the demo tree binds the workspaces to
        assert re.search(r"^ls\s+[\d,]+\.\d\s+32\s+\d+%$", out, re.MULTILINE), out
        assert "<- ledger transaction" in out
        _subscriptions_add_up(out)
        _what_if(out, {"trace", "dispatcher"})
        _reports_read_the_one_world(env)
        _open_the_dashboard_as_the_demo_says(out, env)

        second = subprocess.run(
            [sys.executable, "-m", "dlc_ledger", "demo", "--what-if", "FIFO"],
            capture_output=True, text=True, env=env, timeout=900,
        )  # fmt: skip
        assert second.returncode == 0, second.stderr[-3000:]
        assert "(0 new)" in second.stdout
        assert "0 ledger transactions posted by this run, 0 invoices issued" in second.stdout
        _what_if(second.stdout, {"trace", "dispatcher", "FIFO"})

        verified = subprocess.run(
            [sys.executable, "-m", "dlc_ledger", "verify"],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
        assert verified.returncode == 0, verified.stderr
    finally:
        EmbeddedBroker(tmp_path / "broker").stop()
        for run in ("what-if-fifo",):
            databases.drop(run_url(url, run))
        databases.drop(url)


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "dlc_ledger", *args],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


def _reports_read_the_one_world(env: dict[str, str]) -> None:
    """After the demo, every read reads its one world: the history and the live hours."""
    waits = _cli(env, "report", "waits", "--format", "json")
    assert "run open-loop" in waits.stderr
    assert any(r["waits"] for r in json.loads(waits.stdout))
    preemptions = _cli(env, "report", "preemptions", "--format", "json")
    assert json.loads(preemptions.stdout)
    runs = _cli(env, "runs", "list", "--format", "json")
    assert [r["run"] for r in json.loads(runs.stdout) if r["in_use"]] == ["open-loop"]
    services = _cli(env, "services", "list", "--format", "json")
    assert [s["name"] for s in json.loads(services.stdout)] == ["app-151-live"]
    months = _cli(env, "report", "cost", "--group-by", "month", "--format", "json")
    assert len(json.loads(months.stdout)) >= 5  # the history's months, not twelve hours


def _printed(out: str, pattern: str) -> list[str]:
    """The arguments of the command the demo printed (``dlc-ledger`` dropped)."""
    found = re.search(rf"^  dlc-ledger ({pattern}[^#\n]*)", out, re.MULTILINE)
    assert found, out[-2000:]
    return found.group(1).split()


def _open_the_dashboard_as_the_demo_says(out: str, env: dict[str, str]) -> None:
    """The commands the demo ends with work on the data it made."""
    with running_up(env, *_printed(out, "up "), "--port", "0") as up:
        status, page = get(f"{up.url}/v1/jobs?limit=5", up.token)
        assert status == 200 and len(page["items"]) == 5
        interrupt(up)

    created = subprocess.run(
        [sys.executable, "-m", "dlc_ledger", *_printed(out, "tokens create ")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    serve = _printed(out, "api serve ")
    port = str(free_port())
    serve[serve.index("--port") + 1] = port  # 8000 may be taken on a shared machine
    api = subprocess.Popen(
        [sys.executable, "-m", "dlc_ledger", *serve],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                status, me = get(f"http://127.0.0.1:{port}/v1/whoami", token)
                break
            except OSError:
                assert time.monotonic() < deadline, "api serve did not answer within 60 s"
                time.sleep(0.5)
        assert status == 200 and me["name"] == "me"
    finally:
        api.terminate()
        api.wait(30)
