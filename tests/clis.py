"""Running the real ``dlc-ledger`` commands in-process against a test database."""

from __future__ import annotations

from collections.abc import Callable

from typer.testing import CliRunner

from dlc_ledger.cli.app import app

__all__ = ["CliCall", "cli_caller"]

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
