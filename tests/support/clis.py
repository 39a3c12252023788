"""Running the real ``dlc-ledger`` commands in-process against a test database."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

from typer.testing import CliRunner

from dlc_ledger.cli.app import app

__all__ = ["CliCall", "cli_caller", "cli_process"]

#: ``cli("jobs", "list")`` → stdout; ``cli(..., ok=False)`` → output of a failing command.
CliCall = Callable[..., str]


def cli_caller() -> CliCall:
    runner = CliRunner()

    def call(*args: str, ok: bool = True) -> str:
        result = runner.invoke(app, list(args))
        if ok:
            assert result.exit_code == 0, (result.output, result.exception)
            return result.stdout
        assert result.exit_code != 0, result.output
        # ValueErrors reach the user through dlc_ledger.cli.app.main as one line
        return result.output + (str(result.exception) if result.exception else "")

    return call


def cli_process(
    url: str, *args: str, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess[str]:
    """``dlc-ledger ARGS`` as its own process (``python -m dlc_ledger``) on database ``url``:
    for what an in-process call cannot show (roles, the process's own environment)."""
    return subprocess.run(
        [sys.executable, "-m", "dlc_ledger", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "DATABASE_URL": url, **env},
        timeout=timeout,
    )
