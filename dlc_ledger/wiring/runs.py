"""Replay runs: one database per run on the store's server, and the run commands read.

The demo replays the trace twice: open loop into the configured database (run
``open-loop``: its figures prove the bills) and closed loop into a database of its own (run
``closed-loop``: the dispatcher decided); ``demo --what-if`` adds one run per queue policy.
A run other than ``open-loop`` is the database ``<base>_<run>`` beside the configured one
(``dlc_ledger`` → ``dlc_ledger_closed_loop``), so every read model, report and the API work
on it unchanged. Which run commands read when none is named (``--run`` / ``DLC_RUN``) is
recorded per base database in ``<data dir>/runs.json``; without a record it is the base
database itself, as in production.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from ledger.errors import Invalid, NotFound

__all__ = [
    "OPEN_LOOP",
    "RunRecord",
    "Runs",
    "check_run_name",
    "create_run_database",
    "run_url",
]

#: the run held by the configured database itself
OPEN_LOOP = "open-loop"
_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")


def check_run_name(name: str) -> str:
    if not _NAME.match(name):
        raise Invalid(
            f"run name {name!r}: lowercase letters, digits and '-', starting with a letter, "
            "at most 31 characters"
        )
    return name


def run_url(base_url: str, run: str) -> str:
    """The URL of ``run``'s database: the base URL itself for ``open-loop``."""
    if check_run_name(run) == OPEN_LOOP:
        return base_url
    url = make_url(base_url)
    database = f"{url.database or 'postgres'}_{run.replace('-', '_')}"
    return url.set(database=database).render_as_string(hide_password=False)


def _libpq(url: str) -> str:
    parsed = make_url(url).set(drivername="postgresql")
    return parsed.render_as_string(hide_password=False)


def create_run_database(base_url: str, run: str) -> str:
    """``run``'s database, created (empty) on the base database's server when missing."""
    url = run_url(base_url, run)
    name = make_url(url).database
    with psycopg.connect(_libpq(base_url), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            return url
        try:
            conn.execute(f'CREATE DATABASE "{name}"')
        except psycopg.errors.DuplicateDatabase:
            pass  # created by a concurrent run
        except psycopg.errors.InsufficientPrivilege as exc:
            raise Invalid(
                f"run {run!r} needs a database of its own ({name}) and this role may not "
                f"create one: grant CREATEDB or create it ({exc.diag.message_primary})"
            ) from None
    return url


@dataclass(frozen=True)
class RunRecord:
    """What a run holds, as the demo or a replay described it."""

    name: str
    description: str
    trace: str | None = None
    window: str | None = None
    policy: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


class Runs:
    """The runs recorded for one base database, and the default one (``runs.json``)."""

    def __init__(self, data_dir: Path, base_url: str) -> None:
        self.path = data_dir / "runs.json"
        # keyed without the password: the record names a database, not a credential
        self.key = make_url(base_url).render_as_string(hide_password=True)

    def _all(self) -> dict[str, Any]:
        try:
            loaded = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise Invalid(f"{self.path}: cannot read the recorded runs ({exc})") from None
        return loaded if isinstance(loaded, dict) else {}

    def _mine(self) -> dict[str, Any]:
        mine = self._all().get(self.key)
        return mine if isinstance(mine, dict) else {}

    def records(self) -> dict[str, RunRecord]:
        out: dict[str, RunRecord] = {}
        for name, raw in (self._mine().get("runs") or {}).items():
            if isinstance(raw, dict):
                out[name] = RunRecord(**{**raw, "name": name})
        return out

    def default(self) -> str | None:
        name = self._mine().get("default")
        return name if isinstance(name, str) else None

    def get(self, name: str) -> RunRecord | None:
        return self.records().get(name)

    def require(self, name: str) -> RunRecord | None:
        """``name``'s record; an unknown run other than ``open-loop`` is an error naming
        the runs there are."""
        check_run_name(name)
        if name == OPEN_LOOP:
            return self.get(name)
        record = self.get(name)
        if record is None:
            known = sorted({OPEN_LOOP, *self.records()})
            raise NotFound(f"no run named {name!r} (runs: {', '.join(known)})")
        return record

    def save(self, record: RunRecord, *, make_default: bool = False) -> None:
        everything = self._all()
        mine = everything.setdefault(self.key, {})
        runs = mine.setdefault("runs", {})
        raw = asdict(record)
        raw.pop("name")
        runs[record.name] = raw
        if make_default:
            mine["default"] = record.name
        self._write(everything)

    def set_default(self, name: str) -> None:
        self.require(name)
        everything = self._all()
        everything.setdefault(self.key, {})["default"] = name
        self._write(everything)

    def _write(self, everything: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # written aside and renamed: a reader never sees half a file
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".runs-")
        with os.fdopen(fd, "w") as fh:
            json.dump(everything, fh, indent=2, sort_keys=True)
        os.replace(tmp, self.path)
