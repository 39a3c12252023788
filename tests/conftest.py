"""Shared fixtures: real PostgreSQL databases, one fresh migrated clone per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dlc_ledger.wiring import context
from ledger.store.postgres import PostgresEventStore
from tests.clis import CliCall, cli_caller
from tests.databases import TemplateDatabases, template_databases


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
    """The real CLI, in-process, pointed at the test database (see :mod:`tests.clis`)."""
    monkeypatch.setenv("DATABASE_URL", database_url)
    context.settings.cache_clear()
    yield cli_caller()
    context.settings.cache_clear()
