"""Scratch databases for benchmarks, on the same server the tests use; and kept ones,
for a store too large to rebuild on every run (``python -m bench api --keep``)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from sqlalchemy.engine import make_url

__all__ = ["ADMIN_URL", "kept_database", "mark_ready", "scratch_database", "store_database"]

ADMIN_URL = os.environ.get(
    "DLC_BENCH_ADMIN_URL",
    os.environ.get("DLC_TEST_ADMIN_URL", "postgresql://root@127.0.0.1:5432/test"),
)
#: a kept database is complete once it carries this comment (set last by the bench)
READY = "dlc bench: filled"


def _url(name: str) -> str:
    return make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)


@contextmanager
def scratch_database(prefix: str = "dlcbench") -> Iterator[str]:
    """A new database, dropped on exit: its URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _url(name)
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def kept_database(name: str) -> Iterator[tuple[str, bool]]:
    """Database ``name``, kept after the run: (its URL, True: it must be filled).

    A database a previous run left incomplete (interrupted while filling) is dropped
    and made again. The caller marks it complete with :func:`mark_ready` once filled.
    """
    url = _url(name)
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    if exists:
        with psycopg.connect(ADMIN_URL) as conn:
            comment = conn.execute(
                "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
                (name,),
            ).fetchone()
        if comment is not None and comment[0] == READY:
            yield url, False
            return
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield url, True


def mark_ready(name: str) -> None:
    """Record that the kept database ``name`` is filled (see :func:`kept_database`)."""
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f"COMMENT ON DATABASE \"{name}\" IS '{READY}'")


@contextmanager
def store_database(name: str, *, keep: bool) -> Iterator[tuple[str, bool]]:
    """(URL, True: to be filled): the kept database ``name`` with ``keep``, else a scratch
    one (the benches that share the API bench's store: ``--keep``)."""
    if keep:
        with kept_database(name) as kept:
            yield kept
    else:
        with scratch_database("dlcbench_api") as url:
            yield url, True
