"""Shared fixtures: real PostgreSQL databases, one fresh migrated clone per test.

The fixtures the folders share (a Tansu broker, kubesim, the API's clients, the live
dispatcher, ...) are plugins in :mod:`tests.support`, registered here; helper functions are
imported from there too, never from a conftest.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dlc_ledger.wiring import context
from ledger.store.postgres import PostgresEventStore
from tests.support.clis import CliCall, cli_caller
from tests.support.databases import TemplateDatabases, template_databases

pytest_plugins = [
    "tests.support.api",
    "tests.support.brokers",
    "tests.support.dashboard",
    "tests.support.exports",
    "tests.support.kube",
    "tests.support.live",
    "tests.support.metrics",
    "tests.support.slow",
    "tests.support.watchers",
]


@pytest.fixture(autouse=True)
def _loopback_webhooks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests' webhook receivers listen on loopback, which the sender refuses unless the
    operator's allow-list names it (docs/notifications.md): as an operator would, the suite
    allows loopback. The SSRF tests take it away (``monkeypatch.delenv``)."""
    monkeypatch.setenv("DLC_WEBHOOK_ALLOW", "127.0.0.1,::1")


@pytest.fixture(scope="session")
def databases() -> Iterator[TemplateDatabases]:
    with template_databases() as dbs:
        yield dbs


@pytest.fixture
def database_url(databases: TemplateDatabases) -> Iterator[str]:
    """URL of a fresh database with every migration applied."""
    url = databases.clone()
    yield url
    databases.drop(url)


@pytest.fixture
def store(database_url: str) -> Iterator[PostgresEventStore]:
    store = PostgresEventStore(database_url)
    yield store
    store.close()


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliCall]:
    """The real CLI, in-process, pointed at the test database (see :mod:`tests.support.clis`)."""
    monkeypatch.setenv("DATABASE_URL", database_url)
    context.settings.cache_clear()
    yield cli_caller()
    context.settings.cache_clear()


@pytest.fixture
def server_tmp() -> Iterator[Path]:
    """A temporary directory the embedded PostgreSQL's own OS user can reach.

    The server runs as another user, so the product makes the directories above its data
    traversable. Under pytest's ``tmp_path`` that does not hold: pytest keeps its root
    (``/tmp/pytest-of-<user>``) at 0700 and resets it whenever a pytest-xdist worker starts
    using it, so a server would lose its data directory mid-test."""
    path = Path(tempfile.mkdtemp(prefix="dlc-ledger-test-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)
