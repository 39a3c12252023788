"""Scratch databases for benchmarks, on the same server the tests use."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from sqlalchemy.engine import make_url

__all__ = ["ADMIN_URL", "scratch_database"]

ADMIN_URL = os.environ.get(
    "DLC_BENCH_ADMIN_URL",
    os.environ.get("DLC_TEST_ADMIN_URL", "postgresql://root@127.0.0.1:5432/test"),
)


@contextmanager
def scratch_database(prefix: str = "dlcbench") -> Iterator[str]:
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
