"""Resolving configuration into live parts: the database URL, the store, the broker.

The composition root's one place for "where is everything": commands call these
instead of reading the environment themselves. It is also where the event store's
adapter is chosen (PostgreSQL): consumers and projections are handed an
:class:`~ledger.store.base.EventStore` and never import the adapter.

And where each part's database login is chosen (docs/store.md, "Roles"): the schema owner
migrates (``db upgrade``, and the dev tools that reset a database: ``demo``, ``replay``);
the API and the read commands connect as a member of ``dlc_ledger_reader``; the services and
the write commands as a member of ``dlc_ledger_writer``. On the embedded database those
logins are the server's own (``dlc_ledger_api``, ``dlc_ledger_service``); elsewhere they are
``DATABASE_URL_READER`` and ``DATABASE_URL_WRITER``, each ``DATABASE_URL`` when unset (then
every part connects as that one login, as before: ``up`` says so on stderr).
"""

from __future__ import annotations

import getpass
import os
import sys
from collections.abc import Callable
from functools import cache, partial
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from dlc_ledger.wiring.runs import OPEN_LOOP, Runs, run_url
from dlc_ledger.wiring.settings import Settings, load_settings
from ledger.errors import Invalid, Unavailable
from ledger.store.base import EventStore
from ledger.store.engines import has_password, make_engine, normalise_url
from ledger.store.postgres import PostgresEventStore
from ledger.store.roles import READER_LOGIN, WRITER_LOGIN
from migrations.runner import require_current, upgrade

__all__ = [
    "Role",
    "base_database_url",
    "component_url",
    "current_run",
    "database_url",
    "kafka_bootstrap",
    "local_principal",
    "login_note",
    "open_api_store",
    "open_reader",
    "open_store",
    "open_store_at",
    "option_database_url",
    "read_wait",
    "ready_schema",
    "role_url",
    "roles_apart",
    "run_choice",
    "run_label",
    "run_note",
    "schema_revision",
    "settings",
    "store_opener",
]

#: who connects: the schema owner, a member of ``dlc_ledger_reader``, of ``dlc_ledger_writer``
Role = Literal["owner", "reader", "writer"]


@cache
def settings() -> Settings:
    return load_settings()


#: ``dlc-ledger --run NAME``: the run commands read and write (set once by the CLI's root
#: options); None: ``DLC_RUN``, else the recorded default (:mod:`dlc_ledger.wiring.runs`)
run_choice: str | None = None


def database_url(*, announce: bool = True, create: bool = False, role: Role = "writer") -> str:
    """The database of the run in use (:func:`current_run`): ``DATABASE_URL`` or the embedded
    server's (started if needed) for ``open-loop``, else the run's own beside it; as
    ``role``'s login (:func:`role_url`)."""
    base = base_database_url(announce=announce, create=create)
    run = current_run(base)
    url = role_url(role, base)
    return url if run is None else run_url(url, run)


def role_url(role: Role, base: str) -> str:
    """``base`` (:func:`base_database_url`) as ``role``'s login: the owner's is ``base``;
    the reader's and writer's are ``DATABASE_URL_READER`` / ``_WRITER`` (``DATABASE_URL``
    when unset), or on the embedded database its own logins."""
    if role == "owner":
        return base
    cfg = settings()
    if cfg.database_url:
        given = cfg.database_url_reader if role == "reader" else cfg.database_url_writer
        return normalise_url(given) if given else base
    from dlc_ledger.wiring.embedded_postgres import embedded_login_url

    login = READER_LOGIN if role == "reader" else WRITER_LOGIN
    return embedded_login_url(base, cfg.data_dir, login)


def roles_apart() -> bool:
    """Whether readers and writers connect as logins of their own: on the embedded database,
    or with both ``DATABASE_URL_READER`` and ``DATABASE_URL_WRITER`` set."""
    cfg = settings()
    return not cfg.database_url or bool(cfg.database_url_reader and cfg.database_url_writer)


def login_note() -> str | None:
    """One line for stderr when readers and writers are not apart (:func:`roles_apart`):
    which login each connects as; None when they are apart."""
    if roles_apart():
        return None
    base = base_database_url(announce=False)
    reader, writer = (make_url(role_url(r, base)).username or "$USER" for r in ("reader", "writer"))
    who = (
        f"every part connects as {reader!r}"
        if reader == writer
        else f"the API and the reads connect as {reader!r}, the services as {writer!r}"
    )
    return (
        f"note: {who} (DATABASE_URL); set DATABASE_URL_READER and DATABASE_URL_WRITER to run "
        "the API as a reader login and the services as a writer login (docs/store.md, Roles)"
    )


def component_url(role: Role, component: str, *, create: bool = False) -> str:
    """The URL ``component`` connects with: ``role``'s login (:func:`database_url`), and
    ``application_name`` ``dlc-ledger-<component>`` so that ``pg_stat_activity`` names it."""
    url = make_url(database_url(announce=False, create=create, role=role))
    named = url.update_query_dict({"application_name": f"dlc-ledger-{component}"})
    return named.render_as_string(hide_password=False)


def current_run(base: str) -> str | None:
    """The run named by ``--run`` or ``DLC_RUN``, else the recorded default (None: the base
    database, nothing recorded); an unknown run is an error naming the runs there are."""
    name = run_choice or settings().run
    runs = Runs(settings().data_dir, base)
    if name is None:
        name = runs.default()
        if name is None or (name != OPEN_LOOP and runs.get(name) is None):
            return None
    runs.require(name)
    return name


def run_label(base: str) -> str | None:
    """``<run>: <what it holds>`` for the run in use; None where no run is recorded."""
    records = Runs(settings().data_dir, base).records()
    if not records:
        return None
    name = current_run(base) or OPEN_LOOP
    record = records.get(name)
    return f"{name}: {record.description if record else 'the exact open-loop replay (the bills)'}"


def run_note(base: str) -> str | None:
    """Which run a read shows, and how to read the others: None where no run is recorded."""
    label = run_label(base)
    if label is None:
        return None
    name = label.split(":", 1)[0]
    others = sorted({OPEN_LOOP, *Runs(settings().data_dir, base).records()} - {name})
    hint = f"; the others: {', '.join(f'--run {n}' for n in others)}" if others else ""
    return f"run {label}{hint}"


def base_database_url(*, announce: bool = True, create: bool = False) -> str:
    """``DATABASE_URL``, or the embedded server's (started if needed): the ``open-loop``
    run's database, whichever run is in use.

    Only ``create`` makes a new embedded database (``demo``, ``replay``, ``db upgrade``,
    ``watch``, ``ingest``); otherwise a data directory without one is an error.
    """
    cfg = settings()
    if cfg.database_url:
        return normalise_url(cfg.database_url)
    from dlc_ledger.wiring.embedded_postgres import embedded_database_url  # only when used

    url = embedded_database_url(cfg.data_dir, create=create)
    if announce:
        print(f"using embedded PostgreSQL under {cfg.data_dir / 'postgres'}", file=sys.stderr)
    return url


def schema_revision(store: PostgresEventStore) -> tuple[str | None, list[Any]]:
    """The schema's applied revision (None: never migrated) and its migration branches."""
    from migrations.runner import current_revision, schema_branches

    revision = current_revision(store.engine)
    return revision, (schema_branches(store.engine) if revision else [])


def migrate(revision: str, *, down: bool = False) -> str | None:
    """``db upgrade`` / ``db downgrade`` to ``revision``; the revision reached (None: base).
    An upgrade may create the embedded database; a downgrade needs one that exists."""
    from migrations.runner import current_revision, downgrade

    engine = make_engine(database_url(create=not down, role="owner"))
    if down:
        downgrade(engine, revision)
    else:
        upgrade(engine, revision)
    return current_revision(engine)


def open_store_at(url: str, *, create: bool = False) -> PostgresEventStore:
    """The store at ``url`` (an option's URL), its schema made ready as by :func:`open_store`."""
    store = PostgresEventStore(url)
    ready_schema(store.engine, create=create)
    return store


def ready_schema(engine: Engine, *, create: bool = False) -> None:
    """Only ``db upgrade`` migrates a configured database: elsewhere a schema that is not at
    this version's heads is a one-line error naming it (the deployed roles could not migrate
    anyway, see ``ledger/store/roles.py``). The embedded database is the CLI's own: a
    command that may create it (``create``) also brings it up to date, as its owner, on a
    connection of its own (closed at once), whichever login ``engine`` has."""
    if not (create and not settings().database_url):
        require_current(engine)
        return
    owner = make_url(base_database_url(announce=False)).set(database=engine.url.database)
    if owner.username == engine.url.username:
        upgrade(engine)
        return
    owner_engine = make_engine(owner.render_as_string(hide_password=False))
    try:
        upgrade(owner_engine)
    finally:
        owner_engine.dispose()


def option_database_url(url: str | None, url_file: Path | None) -> str | None:
    """A command's ``--database-url`` / ``--database-url-file``, or None (then
    :func:`database_url`). A password on the command line is refused: every local user
    reads it in the process list; the file (owner-only) or ``DATABASE_URL`` carry one."""
    if url is not None and url_file is not None:
        raise Invalid("give --database-url or --database-url-file, not both")
    if url is not None and has_password(url):
        raise Invalid(
            "--database-url carries a password, which every local user can read in the "
            "process list: set DATABASE_URL or use --database-url-file"
        )
    if url_file is None:
        return url
    try:
        lines = url_file.read_text().strip().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise Invalid(f"--database-url-file {url_file}: cannot read it ({exc})") from None
    if not lines:
        raise Invalid(f"--database-url-file {url_file} is empty")
    return normalise_url(lines[0].strip())


def open_store(
    *, check: bool = True, announce: bool = True, create: bool = False, role: Role = "writer"
) -> PostgresEventStore:
    """The store as ``role``'s login (a writer's unless told otherwise: the owner only
    migrates), its schema checked first (:func:`ready_schema`) unless told otherwise."""
    engine = make_engine(database_url(announce=announce, create=create, role=role))
    if check:
        ready_schema(engine, create=create)
    return PostgresEventStore(engine)


def open_api_store(*, statement_timeout: float | None = None) -> PostgresEventStore:
    """The API's store, its schema checked: reads as the reader's login, writes (the
    subscription orders, notification rules) as the writer's, on a pool opened by the
    first write (:class:`~dlc_ledger.wiring.role_stores.ReadWriteStore`); one pool when both
    are the same login. ``statement_timeout`` (seconds) bounds every statement of both."""
    from dlc_ledger.wiring.role_stores import ReadWriteStore

    reader = component_url("reader", "api")
    writer = component_url("writer", "api-writes")
    one_login = _unnamed(reader) == _unnamed(writer)
    store = (
        PostgresEventStore(reader, statement_timeout=statement_timeout)
        if one_login
        else ReadWriteStore(reader, writer, statement_timeout=statement_timeout)
    )
    ready_schema(store.engine)
    return store


#: ``(position, timeout seconds)`` a read command waits for (``dlc-ledger --wait-for P``):
#: set once by the CLI's root options before a command runs.
read_wait: tuple[int, float] | None = None


def _unnamed(url: str) -> str:
    bare = make_url(url).difference_update_query(["application_name"])
    return bare.render_as_string(hide_password=False)


def open_reader(*, announce: bool = True) -> PostgresEventStore:
    """The store for a read command: reads show the read models as projected (they never
    project), so a note on stderr says how far behind the store's head they are; with
    ``--wait-for`` it first waits, bounded, until they have projected that position."""
    from projections.freshness import read_freshness, wait_for_position

    store = open_store(announce=announce, role="reader")
    note = run_note(base_database_url(announce=False))
    if note and announce:
        print(note, file=sys.stderr)
    if read_wait is not None:
        seen = wait_for_position(store, *read_wait)
    else:
        with store.snapshot() as uow:
            seen = read_freshness(uow)
    if seen.behind:
        print(
            f"note: the read models are {seen.behind} events behind the store (projected to "
            f"position {seen.projected} of {seen.head}; the projector catches up: "
            "dlc-ledger project)",
            file=sys.stderr,
        )
    return store


def store_opener(url: str) -> Callable[[], EventStore]:
    """What a projector lane opens its store with (:data:`consumers.lanes.StoreOpener`):
    picklable, since a lane starts in a fresh interpreter, and naming the adapter's class
    itself, so unpickling it imports the adapter and nothing of this package (a lane
    starts faster). The schema is not checked: the process handing out ``url`` did."""
    return partial(PostgresEventStore, url)


def kafka_bootstrap(*, start: bool = True) -> str:
    """``KAFKA_BOOTSTRAP``, or the embedded broker's (started if needed)."""
    cfg = settings()
    if cfg.kafka_bootstrap:
        return cfg.kafka_bootstrap
    from dlc_ledger.wiring.broker import EmbeddedBroker

    broker = EmbeddedBroker(cfg.data_dir / "broker", topic=cfg.topic, partitions=cfg.partitions)
    status = broker.start() if start else broker.status()
    if not status.running:
        raise Unavailable("the embedded broker is not running: dlc-ledger broker start")
    return broker.bootstrap


def local_principal() -> str:
    """Who a command acts for, as events name it (``source``): ``api/<login>`` of the user
    running it (``$USER``, else the login name). An API names its caller instead."""
    user = os.environ.get("USER")
    if not user:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "unknown"
    return f"api/{user}"
