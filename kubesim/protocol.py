"""The HTTP plumbing every kubesim verb shares: Status bodies, API errors, JSON responses.

The request handler is assembled from one mixin per concern (:mod:`kubesim.listwatch`,
:mod:`kubesim.writes`, routed by :mod:`kubesim.routes`); each builds on this base.
"""

from __future__ import annotations

import logging
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import orjson

from kubesim.selectors import Matcher, SelectorError, parse_field_selector, parse_label_selector
from kubesim.store import Object

if TYPE_CHECKING:
    from kubesim.server import SimServer

__all__ = ["ApiError", "HandlerBase", "status_body"]

log = logging.getLogger(__name__)


def status_body(code: int, reason: str, message: str, details: Object | None = None) -> Object:
    """A ``Status`` object, as the API server answers errors (and some deletions)."""
    body: Object = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 400 else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


class ApiError(Exception):
    """Raised by a verb to answer with a ``Status`` body (and extra headers)."""

    def __init__(self, code: int, reason: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.body = status_body(code, reason, message)
        self.code = code
        self.headers = headers or {}


class HandlerBase(BaseHTTPRequestHandler):
    """Reading a request and answering it with JSON, as every verb does."""

    protocol_version = "HTTP/1.1"
    server: SimServer

    def date_time_string(self, timestamp: float | None = None) -> str:
        # the Date header is the cluster's clock (the virtual one), as kube-apiserver's is
        return formatdate(self.server.sim.served_now().timestamp(), usegmt=True)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def _query(self) -> dict[str, str]:
        parsed = parse_qs(urlsplit(self.path).query, keep_blank_values=True)
        return {k: v[-1] for k, v in parsed.items()}

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send_json(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = orjson.dumps(body)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.server.sim.record(self.command, self.path, code)  # before the client can see it
        self.wfile.write(data)

    def _parse(self, body: bytes) -> Any:
        try:
            return orjson.loads(body) if body else None
        except orjson.JSONDecodeError as exc:
            raise ApiError(400, "BadRequest", f"invalid JSON: {exc}") from exc

    def _matcher(self, query: dict[str, str]) -> Matcher:
        try:
            labels = parse_label_selector(query.get("labelSelector"))
            fields = parse_field_selector(query.get("fieldSelector"))
        except SelectorError as exc:
            raise ApiError(400, "BadRequest", str(exc)) from exc
        return lambda o: labels(o) and fields(o)

    @staticmethod
    def _int(query: dict[str, str], key: str) -> int | None:
        value = query.get(key)
        if value in (None, ""):
            return None
        try:
            return int(str(value))
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"invalid {key}: {value!r}") from exc
