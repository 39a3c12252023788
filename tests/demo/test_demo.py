"""The README's main job, as a user runs it: ``dlc-ledger demo`` in a real process.

It replays the whole openb trace through kubesim, the watchers, a real Tansu
broker and PostgreSQL, bills it and prints the reports; running it again adds
nothing to the store.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dlc_ledger.wiring.broker import EmbeddedBroker
from tests.databases import TemplateDatabases


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

        second = subprocess.run(
            [sys.executable, "-m", "dlc_ledger", "demo"],
            capture_output=True, text=True, env=env, timeout=900,
        )  # fmt: skip
        assert second.returncode == 0, second.stderr[-3000:]
        assert "(0 new)" in second.stdout
        assert "0 ledger transactions posted by this run, 0 invoices issued" in second.stdout

        verified = subprocess.run(
            [sys.executable, "-m", "dlc_ledger", "verify"],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
        assert verified.returncode == 0, verified.stderr
    finally:
        EmbeddedBroker(tmp_path / "broker").stop()
        databases.drop(url)
