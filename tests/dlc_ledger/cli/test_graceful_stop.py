"""The long-running commands a Deployment runs stop cleanly on SIGTERM (what Kubernetes
sends a pod first): the round in hand finishes and the process exits 0, before the grace
period would end it with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest


@pytest.mark.parametrize(
    "args",
    [
        ("billing", "serve", "--interval-seconds", "0.5"),
        ("notifications", "send", "--interval", "0.2"),
    ],
    ids=["billing-serve", "notifications-send"],
)
def test_sigterm_ends_the_command_with_exit_0(database_url: str, args: tuple[str, ...]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlc_ledger", *args],
        env={**os.environ, "DATABASE_URL": database_url},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(4.0)  # started and through a few rounds
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, (out, err)
    assert "Traceback" not in err, err
