"""Running ``dlc-ledger up`` as a process for a test: its printed URL and token, requests
with them, Ctrl-C to its process group (what a terminal sends) and what is left after."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

__all__ = ["Up", "database_sessions", "get", "group_processes", "interrupt", "running_up"]


@dataclass
class Up:
    proc: subprocess.Popen[str]
    url: str
    token: str
    printed: list[str]
    errors: list[str]  # stderr lines, as they come
    stderr_reader: threading.Thread

    def stderr(self) -> str:
        """All of stderr, once the process has exited."""
        self.proc.wait(30)
        self.stderr_reader.join(10)
        return "".join(self.errors)


def get(url: str, token: str | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read().decode()
            status = response.status
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read().decode() or "null")
    if response.headers.get_content_type() == "application/json":
        return status, json.loads(body)
    return status, body


def database_sessions(url: str) -> list[tuple[str, str]]:
    """``(login, application_name)`` of every other session on ``url``'s database."""
    plain = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(plain, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT usename, application_name FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "ORDER BY application_name, usename"
        ).fetchall()
    return [(str(user), str(name)) for user, name in rows]


def group_processes(pgid: int) -> list[int]:
    """Live processes of process group ``pgid`` (from /proc: psutil is no dependency)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


@contextmanager
def running_up(env: dict[str, str], *args: str) -> Iterator[Up]:
    """``dlc-ledger ARGS`` (``up …``) in its own process group, until it printed its token."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlc_ledger", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its own group: what Ctrl-C reaches, and what must end
    )
    lines: queue.Queue[str | None] = queue.Queue()
    errors: list[str] = []

    def read(stream: Any, into: Any) -> None:
        for line in stream:
            into(line)
        if into == lines.put:
            lines.put(None)

    threading.Thread(target=read, args=(proc.stdout, lines.put), daemon=True).start()
    stderr_reader = threading.Thread(target=read, args=(proc.stderr, errors.append), daemon=True)
    stderr_reader.start()
    printed: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while not any("token:" in line for line in printed):
            left = deadline - time.monotonic()
            assert left > 0, f"no token printed within 60 s: {printed} {''.join(errors)[-3000:]}"
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                continue
            assert line is not None, f"up exited {proc.wait()}: {''.join(errors)[-3000:]}"
            printed.append(line)
        url = re.search(r"api:\s+(http://\S+)/v1", "".join(printed))
        token = re.search(r"token:\s+(dlct_\S+)", "".join(printed))
        assert url and token, printed
        yield Up(proc, url.group(1), token.group(1), printed, errors, stderr_reader)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def interrupt(up: Up, signum: int = signal.SIGINT) -> float:
    """Ctrl-C (or ``signum``: SIGTERM as a service manager stops it); the seconds until
    ``up`` exited (0 required), and nothing of it left."""
    started = time.monotonic()
    os.killpg(up.proc.pid, signum)
    code = up.proc.wait(timeout=30)
    took = time.monotonic() - started
    assert "stopping (Ctrl-C again to quit at once)" in up.stderr()
    assert code == 0
    assert group_processes(up.proc.pid) == []
    return took
