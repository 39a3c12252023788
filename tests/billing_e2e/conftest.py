"""Fixtures for the billing end-to-end tests: the CLI on the test database, event builders."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import hypothesis  # noqa: F401  (see below)
import pytest
from typer.testing import CliRunner

from consumers import context
from consumers.cli import app

CliCall = Callable[..., str]

# hypothesis is imported up front: importing it lazily at the end of a run that only
# holds the trace test trips a CPython 3.11 AST recursion-depth check in pytest's
# assertion rewriter ("AST constructor recursion depth mismatch").


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliCall]:
    """``cli("prices", "list")`` runs the real command on the test database, returns stdout."""
    monkeypatch.setenv("DATABASE_URL", database_url)
    context.settings.cache_clear()
    runner = CliRunner()

    def call(*args: str, ok: bool = True) -> str:
        result = runner.invoke(app, list(args))
        if ok:
            assert result.exit_code == 0, (result.output, result.exception)
            return result.stdout
        assert result.exit_code != 0, result.output
        return result.output + (str(result.exception) if result.exception else "")

    yield call
    context.settings.cache_clear()
