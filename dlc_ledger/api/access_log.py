"""The access log and the headers every answer carries, as one pure ASGI middleware.

Pure ASGI rather than Starlette's ``BaseHTTPMiddleware``: that one runs the app in a
second task and streams the body through a memory channel, which cost a measurable part
of each request's CPU (bench/RESULTS.md, api). Here the app's own ``send`` is wrapped:
the headers are added to ``http.response.start`` and the body passes untouched.

Headers, on every answer (issue 37, docs/api.md "Headers"): a Content-Security-Policy (the
dashboard's for its page and assets, ``default-src 'none'`` for everything else: the API
answers data, never a document to render), ``X-Content-Type-Options: nosniff``,
``Referrer-Policy: no-referrer``; ``Cache-Control: no-store`` on an answer to a request
that carried a bearer (no shared or browser cache keeps it) unless the route set its own;
``Vary: Accept`` under ``/v1`` (JSON or CSV by ``Accept``); the freshness headers.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dlc_ledger.api.dashboard_mount import ASSETS_PATH, CONTENT_SECURITY_POLICY
from dlc_ledger.api.freshness import freshness_values
from dlc_ledger.api.metrics import observe

__all__ = ["ACCESS_LOG", "AccessLog", "printable"]

ACCESS_LOG = logging.getLogger("dlc_ledger.api.access")

#: an answer that is data: nothing in it may load, run or be framed
API_CONTENT_SECURITY_POLICY = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'"

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with control characters escaped (``\\x1b``): a URL holding terminal escape
    sequences must not drive the operator's console through the log."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _policy(path: str) -> str:
    if path == "/" or path.startswith(ASSETS_PATH + "/"):
        return CONTENT_SECURITY_POLICY
    return API_CONTENT_SECURITY_POLICY


def _has_bearer(scope: Scope) -> bool:
    return any(name == b"authorization" for name, _ in scope["headers"])


class AccessLog:
    """One log line and one metrics observation per HTTP request; the common headers."""

    def __init__(self, app: ASGIApp, *, clock: Callable[[], float] = time.perf_counter) -> None:
        self.app = app
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = self.clock()
        # made here so that every copy of the scope below shares this one dict
        state = scope.setdefault("state", {})
        status = 500  # what the server answers if the app raises before it starts one
        path: str = scope["path"]

        async def send_with_headers(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = MutableHeaders(scope=message)
                _add_headers(scope, state, path, headers)
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        finally:
            elapsed = self.clock() - started
            observe(scope, status, elapsed)
            principal = state.get("principal")
            who = f"{principal.name}({principal.token_id})" if principal else "-"
            ACCESS_LOG.info(
                "%s %s %s %d %.1fms",
                printable(who),
                printable(scope["method"]),
                printable(path),
                status,
                elapsed * 1000,
            )


def _add_headers(scope: Scope, state: dict[str, Any], path: str, headers: MutableHeaders) -> None:
    for name, value in freshness_values(state):
        headers[name] = value
    headers.setdefault("Content-Security-Policy", _policy(path))
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("Referrer-Policy", "no-referrer")
    if _has_bearer(scope):
        headers.setdefault("Cache-Control", "no-store")
    if path.startswith("/v1/"):
        headers.setdefault("Vary", "Accept")
