"""Least privilege, enforced by PostgreSQL: the real commands run under login roles that are
members of ``dlc_ledger_writer`` / ``dlc_ledger_reader``, and each is refused what it must not do.
Only ``db upgrade`` migrates; every other command names it when the schema is behind."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from functools import partial

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from dlc_ledger.wiring.role_stores import ReadWriteStore
from ledger.store.engines import make_engine
from ledger.store.postgres import PostgresEventStore
from ledger.store.roles import READER_ROLE, WRITER_ROLE
from migrations.runner import downgrade, upgrade
from tests.support.clis import cli_process
from tests.support.databases import TemplateDatabases
from tests.support.factories import occupancy_started

Login = Callable[[str], str]


_cli = partial(cli_process, timeout=180)  # a role's commands start PostgreSQL sessions anew


def _plain(url: str) -> str:
    return url.replace("+psycopg", "")


@pytest.fixture
def login(database_url: str) -> Iterator[Login]:
    """``login(group)``: a new LOGIN role in ``group`` (as documented in docs/store.md); the
    DATABASE_URL that connects as it."""
    created: list[str] = []

    def make(group: str) -> str:
        name = f"t_{group.removeprefix('dlc_ledger_')}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(_plain(database_url), autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {name} LOGIN IN ROLE {group}")
        created.append(name)
        return make_url(database_url).set(username=name).render_as_string(hide_password=False)

    yield make
    with psycopg.connect(_plain(database_url), autocommit=True) as conn:
        for name in created:
            conn.execute(f"DROP OWNED BY {name}")
            conn.execute(f"DROP ROLE {name}")


def _refused(url: str, sql: str) -> str:
    with (
        psycopg.connect(_plain(url), autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege) as caught,
    ):
        conn.execute(sql)
    return str(caught.value)


def _seed(url: str) -> None:
    store = PostgresEventStore(url)
    try:
        store.append([occupancy_started(n) for n in range(3)])
    finally:
        store.close()


def test_every_table_is_granted_and_owned_by_neither_role(database_url: str) -> None:
    with psycopg.connect(_plain(database_url), autocommit=True) as conn:
        relations = conn.execute(
            "SELECT c.relname, c.relkind, pg_get_userbyid(c.relowner) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v')"
        ).fetchall()
        assert len(relations) > 20

        def may(role: str, table: str, privilege: str) -> bool:
            query = "SELECT has_table_privilege(%s, %s, %s)"
            return bool(conn.execute(query, (role, f'"{table}"', privilege)).fetchone()[0])  # type: ignore[index]

        for name, kind, owner in relations:
            assert owner not in (WRITER_ROLE, READER_ROLE, "dlc_ledger_app"), name
            assert may(READER_ROLE, name, "SELECT"), name
            assert may(WRITER_ROLE, name, "SELECT"), name
            for privilege in ("INSERT", "UPDATE", "DELETE", "TRUNCATE"):
                assert not may(READER_ROLE, name, privilege), (name, privilege)
            if kind == "r" and name != "alembic_version":
                assert may(WRITER_ROLE, name, "INSERT"), name
            if kind == "r" and name not in ("events", "dead_letters", "alembic_version"):
                assert may(WRITER_ROLE, name, "UPDATE") and may(WRITER_ROLE, name, "DELETE"), name
        for privilege in ("UPDATE", "DELETE", "TRUNCATE"):
            assert not may(WRITER_ROLE, "events", privilege), privilege
        for privilege in ("INSERT", "UPDATE", "DELETE"):
            assert not may(WRITER_ROLE, "alembic_version", privilege), privilege
        # the deprecated role of earlier versions is a writer, nothing more
        assert not may("dlc_ledger_app", "events", "UPDATE")
        assert may("dlc_ledger_app", "checkpoints", "UPDATE")


def test_a_new_table_is_granted_by_the_next_upgrade(database_url: str) -> None:
    """The grant step covers tables that no migration of today knows."""
    with psycopg.connect(_plain(database_url), autocommit=True) as conn:
        conn.execute("CREATE TABLE later_read_model (k text PRIMARY KEY)")
    engine = make_engine(database_url)
    try:
        upgrade(engine)
    finally:
        engine.dispose()
    with psycopg.connect(_plain(database_url), autocommit=True) as conn:
        query = "SELECT has_table_privilege(%s, 'later_read_model', %s)"
        assert conn.execute(query, (READER_ROLE, "SELECT")).fetchone() == (True,)
        assert conn.execute(query, (WRITER_ROLE, "UPDATE")).fetchone() == (True,)
        assert conn.execute(query, (READER_ROLE, "INSERT")).fetchone() == (False,)


def test_roles_survive_concurrent_upgrades(databases: TemplateDatabases) -> None:
    """Roles are cluster-wide: upgrading many databases at once on one server never fails
    on a role that another upgrade created."""
    urls = [databases.empty() for _ in range(3)]
    try:
        runs = [
            subprocess.Popen(
                [sys.executable, "-m", "dlc_ledger", "db", "upgrade"],
                env={**os.environ, "DATABASE_URL": url},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for url in urls
        ]
        for run in runs:
            _out, err = run.communicate(timeout=180)
            assert run.returncode == 0, err
    finally:
        for url in urls:
            databases.drop(url)


def test_the_writer_runs_its_commands_and_cannot_rewrite_history(
    database_url: str, login: Login
) -> None:
    writer = login(WRITER_ROLE)
    _seed(writer)  # ingest's path: INSERT on events
    for command in (("project",), ("billing", "run"), ("report", "usage"), ("verify",)):
        done = _cli(writer, *command)
        assert done.returncode == 0, (command, done.stderr)
    assert "note: read-only" not in _cli(writer, "report", "cost").stderr

    assert "permission denied" in _refused(writer, "UPDATE events SET source = 'x'")
    assert "permission denied" in _refused(writer, "DELETE FROM events")
    assert "permission denied" in _refused(writer, "TRUNCATE events")
    assert "must be owner" in _refused(writer, "ALTER TABLE events DISABLE TRIGGER ALL")
    assert "must be owner" in _refused(writer, "DROP TABLE checkpoints")
    assert "permission denied" in _refused(writer, "UPDATE alembic_version SET version_num = 'x'")

    # it cannot migrate: refused up front with one line, the schema untouched
    engine = make_engine(database_url)
    try:
        downgrade(engine, "quotas@-1")  # the owner undoes the quota branch's newest step
    finally:
        engine.dispose()
    done = _cli(writer, "db", "upgrade")
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert "does not own the schema" in line and "dlc-ledger db upgrade" in line
    behind = _cli(writer, "jobs", "list")
    assert behind.returncode == 69  # unavailable until the owner migrates (docs/CONVENTIONS.md)
    assert "run `dlc-ledger db upgrade`" in behind.stderr


def test_the_reader_reads_and_cannot_write(database_url: str, login: Login) -> None:
    _seed(database_url)
    reader = login(READER_ROLE)
    for command in (("jobs", "list"), ("report", "usage"), ("verify",), ("quotas", "list")):
        done = _cli(reader, *command)
        assert done.returncode == 0, (command, done.stderr)
    # reads never project: a reader (like any reader) reads as projected, and says how far behind
    cost = _cli(reader, "report", "cost")
    assert cost.returncode == 0, cost.stderr
    assert "note: the read models are 3 events behind the store" in (cost.stderr)

    assert "permission denied" in _refused(reader, "UPDATE checkpoints SET position = 0")
    assert "permission denied" in _refused(
        reader, "INSERT INTO checkpoints (name, updated_at) VALUES ('x', now())"
    )
    store = PostgresEventStore(reader)
    try:
        with pytest.raises(Exception, match="permission denied for table events"):
            store.append([occupancy_started(9)])
    finally:
        store.close()
    project = _cli(reader, "project")
    assert project.returncode == 1
    (line,) = project.stderr.strip().splitlines()
    assert line.startswith("dlc-ledger: error: refused by the database: permission denied")


def test_commands_never_migrate_and_name_db_upgrade(databases: TemplateDatabases) -> None:
    url = databases.empty()
    try:
        for command in (("jobs", "list"), ("report", "cost"), ("verify",), ("project",)):
            done = _cli(url, *command)
            assert done.returncode == 69, command  # unavailable until migrated
            (line,) = done.stderr.strip().splitlines()
            assert "database schema is behind" in line and "dlc-ledger db upgrade" in line
        with psycopg.connect(_plain(url)) as conn:
            tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
            assert tables.fetchone() == (0,)
        assert _cli(url, "db", "upgrade").returncode == 0
        assert _cli(url, "jobs", "list").returncode == 0
    finally:
        databases.drop(url)


def test_one_store_reads_as_the_reader_and_writes_as_the_writer(login: Login) -> None:
    """The API's store (``dlc_ledger/wiring/role_stores.py``): snapshots on the reader's
    login, every transaction (an append, a write use case's catch-up) on the writer's."""
    reader, writer = login(READER_ROLE), login(WRITER_ROLE)
    store = ReadWriteStore(reader, writer)
    try:
        with store.reading() as conn:
            assert conn.execute(text("SELECT current_user")).scalar_one() == _user(reader)
        assert store.head_position() == 0  # a plain read: the reader's pool
        store.append([occupancy_started(1)])  # the writer's: the reader alone is refused
        with store.transaction() as uow:
            who = uow.connection.execute(text("SELECT current_user")).scalar_one()
            assert who == _user(writer)
        assert store.may_write()  # the writer's answer: a write use case catches up after it
        assert store.head_position() == 1
    finally:
        store.close()
    alone = PostgresEventStore(reader)
    try:
        assert not alone.may_write()
    finally:
        alone.close()


def _user(url: str) -> str:
    name = make_url(url).username
    assert name is not None
    return name


def test_role_urls_fall_back_to_database_url_and_say_so(
    database_url: str, login: Login, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dlc_ledger.wiring import context

    reader, writer = login(READER_ROLE), login(WRITER_ROLE)
    monkeypatch.setenv("DATABASE_URL", database_url)
    for name in ("DATABASE_URL_READER", "DATABASE_URL_WRITER", "DLC_RUN"):
        monkeypatch.delenv(name, raising=False)
    context.settings.cache_clear()
    try:
        owner = _user(database_url)
        assert _user(context.database_url(role="reader")) == owner
        assert _user(context.database_url()) == owner  # the writer's, by default
        assert f"every part connects as {owner!r} (DATABASE_URL)" in (context.login_note() or "")

        monkeypatch.setenv("DATABASE_URL_READER", reader)
        context.settings.cache_clear()
        note = context.login_note() or ""
        assert f"the API and the reads connect as {_user(reader)!r}" in note
        assert f"the services as {owner!r}" in note

        monkeypatch.setenv("DATABASE_URL_WRITER", writer)
        context.settings.cache_clear()
        assert context.login_note() is None
        assert _user(context.database_url(role="reader")) == _user(reader)
        assert _user(context.database_url(role="writer")) == _user(writer)
        assert _user(context.database_url(role="owner")) == owner
        named = make_url(context.component_url("reader", "api"))
        assert named.query["application_name"] == "dlc-ledger-api"
        api = context.open_api_store()
        try:
            assert isinstance(api, ReadWriteStore) and _user(str(api.engine.url)) == _user(reader)
        finally:
            api.close()

        monkeypatch.delenv("DATABASE_URL")
        context.settings.cache_clear()
        # the CLI says it in one line (invalid configuration), exit 1
        with pytest.raises(ValueError, match="DATABASE_URL_READER and DATABASE_URL_WRITER without"):
            context.settings()
    finally:
        context.settings.cache_clear()
