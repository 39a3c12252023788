"""Fixtures of the browser test: a replayed trace served by a real uvicorn, an admin
token, and Debian's chromium driven by Playwright (never a downloaded browser).

The session-scoped ``served`` fixture replays once (tests/dlc_ledger/dashboard/trace.py, about a
minute) into a fresh database, then serves :func:`~dlc_ledger.api.app.create_app` on it
from a thread on a free port, for every browser test module. Each test gets its own
browser context (its own sessionStorage), which records every request and console error
so a test can assert the page stayed on its origin and raised nothing.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import uvicorn
from playwright.sync_api import Browser, Page, sync_playwright

from dlc_ledger.api.app import create_app
from dlc_ledger.services.access import create_token
from ledger.store.postgres import PostgresEventStore
from tests.dlc_ledger.dashboard.trace import replay_slice
from tests.support.databases import TemplateDatabases
from tests.support.paths import ROOT

__all__ = ["ARTIFACTS", "CHROMIUM", "Served", "Watched", "require_chromium", "serving", "watching"]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: screenshots, kept by CI as artefacts (gitignored)
ARTIFACTS = ROOT / "test-artifacts" / "dashboard"


def require_chromium() -> None:
    """Skip (with the reason) where no chromium exists, except in CI (``CI`` set), where
    the browser test must run: there it fails at launch instead (.ci/run installs it)."""
    if not Path(CHROMIUM).exists() and not os.environ.get("CI"):
        pytest.skip("no chromium on this machine (apt-get install chromium); CI runs this")


@dataclass(frozen=True)
class Served:
    """The app on the replayed store: its URL, an admin token and an httpx client
    reading the same routes the page reads."""

    base: str
    token: str
    #: a team lead's token: workspace ws-burstable only (its quota subtree, its jobs)
    lead_token: str
    store: PostgresEventStore
    api: httpx.Client


@dataclass
class Watched:
    """A page and what it did: every request URL and every console error."""

    page: Page
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _start(app: object) -> tuple[uvicorn.Server, threading.Thread, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))  # type: ignore[arg-type]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    return server, thread, port


@contextmanager
def serving(store: PostgresEventStore, lead_scope: str) -> Iterator[Served]:
    """:func:`~dlc_ledger.api.app.create_app` on ``store`` from a thread on a free port,
    with an admin token (``dash-admin``) and a lead's (``dash-lead``, role ``lead_scope``)."""
    token = create_token(store, ["admin"], name="dash-admin", created_by="test").secret
    lead = create_token(store, [lead_scope], name="dash-lead", created_by="test").secret
    server, thread, port = _start(create_app(store))
    base = f"http://127.0.0.1:{port}/"
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as api:
        try:
            yield Served(base, token, lead, store, api)
        finally:
            server.should_exit = True
            thread.join(timeout=30)


@pytest.fixture(scope="session")
def served(
    databases: TemplateDatabases, bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    require_chromium()  # before the replay: no minute spent for a skipped test
    url = databases.clone()
    store = PostgresEventStore(url)
    try:
        started = time.monotonic()
        summary = replay_slice(store, bootstrap, tmp_path_factory.mktemp("dashboard"))
        assert summary.ok and summary.dead_letters == 0, summary.lines()
        print(f"\nreplayed the dashboard's slice in {time.monotonic() - started:.1f} s")
        with serving(store, "workspace:ws-burstable") as out:
            yield out
    finally:
        store.close()
        databases.drop(url)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    require_chromium()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM)
        try:
            yield launched
        finally:
            launched.close()
    print(f"\ndashboard screenshots: {ARTIFACTS}")


@contextmanager
def watching(browser: Browser) -> Iterator[Watched]:
    """A fresh context at a laptop's 1366x768, recording requests and console errors."""
    context = browser.new_context(viewport={"width": 1366, "height": 768}, accept_downloads=True)
    context.set_default_timeout(20_000)
    page = context.new_page()
    out = Watched(page)
    page.on("request", lambda request: out.requests.append(request.url))
    page.on("console", lambda msg: out.errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: out.errors.append(str(exc)))
    try:
        yield out
    finally:
        context.close()


@pytest.fixture
def watched(browser: Browser, served: Served) -> Iterator[Watched]:
    """A fresh context on the replayed slice's server (see :func:`watching`)."""
    with watching(browser) as out:
        yield out
