"""The loopback HTTP front end: the Kubernetes REST and watch protocol over the store.

It speaks enough of the API server's protocol for the official `kubernetes` client and the
watchers to run unchanged: discovery, LIST with pagination, WATCH as chunked JSON lines with
bookmarks and 410 Expired, POST, merge/JSON PATCH and (graceful) DELETE; plus fault knobs
that tests call to break watches, rate-limit or fail requests and compact history.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from kubesim.clock import DEFAULT_EPOCH, VirtualClock
from kubesim.cluster import Cluster
from kubesim.patches import PatchError, apply_json_patch, merge_patch
from kubesim.resources import RESOURCES, ResourceType, find_resource
from kubesim.selectors import Matcher, SelectorError, parse_field_selector, parse_label_selector
from kubesim.store import Conflict, Expired, NotFound, Object, Store, Subscription

__all__ = ["KubeSim", "RequestRecord"]

log = logging.getLogger(__name__)

_DEFAULT_WATCH_SECONDS = 1800.0
_POLL = 0.02


@dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str
    status: int


@dataclass
class _Failure:
    remaining: int
    status: int
    retry_after: int | None


def _status(code: int, reason: str, message: str, details: Object | None = None) -> Object:
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


class _ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.body = _status(code, reason, message)
        self.code = code
        self.headers = headers or {}


def _encode_continue(token: str, rv: int, offset: int) -> str:
    raw = orjson.dumps({"t": token, "rv": rv, "o": offset})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(text: str) -> tuple[str, int, int]:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        data = orjson.loads(raw)
        return str(data["t"]), int(data["rv"]), int(data["o"])
    except (ValueError, KeyError, TypeError) as exc:
        raise _ApiError(400, "BadRequest", f"invalid continue token: {exc}") from exc


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    # -- plumbing --------------------------------------------------------------------------

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
        self.server.sim._record(self.command, self.path, code)  # before the client can see it
        self.wfile.write(data)

    def _dispatch(self) -> None:
        sim = self.server.sim
        body = self._read_body()
        try:
            failure = sim._take_failure()
            if failure is not None:
                headers = {}
                if failure.retry_after is not None:
                    headers["Retry-After"] = str(failure.retry_after)
                reason = "TooManyRequests" if failure.status == 429 else "InternalError"
                raise _ApiError(failure.status, reason, "injected failure", headers)
            self._route(body)
        except _ApiError as err:
            self._send_json(err.code, err.body, err.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # pragma: no cover - surfaced to the client as 500
            log.exception("kubesim request failed")
            self._send_json(500, _status(500, "InternalError", repr(exc)))

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _dispatch

    # -- routing ---------------------------------------------------------------------------

    def _route(self, body: bytes) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        parts = [p for p in path.split("/") if p]
        method = self.command
        if method == "GET" and self._discovery(parts):
            return
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise _ApiError(
                404, "NotFound", f"the server could not find the requested resource ({path})"
            )
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 2:
            raise _ApiError(
                404, "NotFound", f"the server could not find the requested resource ({path})"
            )
        res = find_resource(group, version, rest[0])
        if res is None:
            raise _ApiError(
                404, "NotFound", f"the server could not find the requested resource ({path})"
            )
        name = rest[1] if len(rest) == 2 else None
        if res.namespaced and name is not None and namespace is None:
            raise _ApiError(404, "NotFound", "namespace required")
        ns = namespace or ""
        query = self._query()
        if name is None:
            if method == "GET":
                if query.get("watch") in ("true", "1", "True"):
                    self._watch(res, namespace, query)
                else:
                    self._list(res, namespace, query)
            elif method == "POST":
                self._create(res, ns, body)
            else:
                raise _ApiError(405, "MethodNotAllowed", f"{method} not allowed on a collection")
            return
        cluster = self.server.sim.cluster
        try:
            if method == "GET":
                self._send_json(200, cluster.store.get(res, ns, name))
            elif method == "PATCH":
                self._patch(res, ns, name, body)
            elif method == "PUT":
                self._replace(res, ns, name, body)
            elif method == "DELETE":
                self._delete(res, ns, name, body, query)
            else:
                raise _ApiError(405, "MethodNotAllowed", f"{method} not allowed")
        except NotFound as exc:
            raise _ApiError(
                404,
                "NotFound",
                f'{res.plural}{"." + res.group if res.group else ""} "{name}" not found',
            ) from exc

    def _discovery(self, parts: list[str]) -> bool:
        if parts == ["version"]:
            self._send_json(
                200,
                {
                    "major": "1",
                    "minor": "31",
                    "gitVersion": "v1.31.0-kubesim",
                    "gitCommit": "0000000000000000000000000000000000000000",
                    "gitTreeState": "clean",
                    "buildDate": "2026-01-01T00:00:00Z",
                    "goVersion": "go1.22.0",
                    "compiler": "gc",
                    "platform": "linux/amd64",
                },
            )
        elif parts in (["healthz"], ["readyz"], ["livez"]):
            data = b"ok"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif parts == ["api"]:
            self._send_json(
                200,
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}
                    ],
                },
            )
        elif parts == ["apis"]:
            groups: dict[str, set[str]] = {}
            for res in RESOURCES:
                if res.group:
                    groups.setdefault(res.group, set()).add(res.version)
            self._send_json(
                200,
                {
                    "kind": "APIGroupList",
                    "apiVersion": "v1",
                    "groups": [
                        {
                            "name": g,
                            "versions": [
                                {"groupVersion": f"{g}/{v}", "version": v} for v in sorted(vs)
                            ],
                            "preferredVersion": {
                                "groupVersion": f"{g}/{sorted(vs)[0]}",
                                "version": sorted(vs)[0],
                            },
                        }
                        for g, vs in sorted(groups.items())
                    ],
                },
            )
        elif (parts[:1] == ["api"] and len(parts) == 2) or (
            parts[:1] == ["apis"] and len(parts) == 3
        ):
            group = "" if parts[0] == "api" else parts[1]
            version = parts[-1]
            found = [r for r in RESOURCES if r.group == group and r.version == version]
            if not found:
                return False
            self._send_json(
                200,
                {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": found[0].api_version,
                    "resources": [
                        {
                            "name": r.plural,
                            "singularName": r.kind.lower(),
                            "namespaced": r.namespaced,
                            "kind": r.kind,
                            "shortNames": list(r.short_names),
                            "verbs": [
                                "create",
                                "delete",
                                "get",
                                "list",
                                "patch",
                                "update",
                                "watch",
                            ],
                        }
                        for r in found
                    ],
                },
            )
        else:
            return False
        return True

    # -- verbs -----------------------------------------------------------------------------

    def _matcher(self, query: dict[str, str]) -> Matcher:
        try:
            labels = parse_label_selector(query.get("labelSelector"))
            fields = parse_field_selector(query.get("fieldSelector"))
        except SelectorError as exc:
            raise _ApiError(400, "BadRequest", str(exc)) from exc
        return lambda o: labels(o) and fields(o)

    @staticmethod
    def _int(query: dict[str, str], key: str) -> int | None:
        value = query.get(key)
        if value in (None, ""):
            return None
        try:
            return int(str(value))
        except ValueError as exc:
            raise _ApiError(400, "BadRequest", f"invalid {key}: {value!r}") from exc

    def _list(self, res: ResourceType, namespace: str | None, query: dict[str, str]) -> None:
        store = self.server.sim.store
        matcher = self._matcher(query)
        limit = self._int(query, "limit") or 0
        token_text = query.get("continue")
        try:
            if token_text:
                token, rv, offset = _decode_continue(token_text)
                try:
                    snap = store.find_snapshot(token, rv)
                except Expired as exc:
                    raise _ApiError(
                        410,
                        "Expired",
                        "The provided continue parameter is too old to display a consistent list "
                        f"result. You can start a new list without the continue parameter. ({exc})",
                    ) from exc
            else:
                requested = self._int(query, "resourceVersion")
                if requested:
                    store.check_rv(requested)
                token, snap = store.snapshot(res)
                offset = 0
        except Expired as exc:
            raise _ApiError(410, "Expired", str(exc)) from exc
        selected = [
            o
            for o in snap.items
            if (namespace is None or o["metadata"].get("namespace") == namespace) and matcher(o)
        ]
        page = selected[offset : offset + limit] if limit else selected[offset:]
        meta: Object = {"resourceVersion": str(snap.rv)}
        end = offset + len(page)
        if limit and end < len(selected):
            meta["continue"] = _encode_continue(token, snap.rv, end)
            meta["remainingItemCount"] = len(selected) - end
        self._send_json(
            200,
            {"kind": res.list_kind, "apiVersion": res.api_version, "metadata": meta, "items": page},
        )

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _write_line(self, line: bytes) -> None:
        size = self.server.sim.chunk_size
        if not size:
            self._write_chunk(line)
            return
        for start in range(0, len(line), size):
            self._write_chunk(line[start : start + size])
            time.sleep(0.0005)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True

    def _watch(self, res: ResourceType, namespace: str | None, query: dict[str, str]) -> None:
        sim = self.server.sim
        store = sim.store
        matcher = self._matcher(query)
        rv_text = query.get("resourceVersion")
        since = None if rv_text in (None, "", "0") else self._int(query, "resourceVersion")
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1", "True")
        timeout = self._int(query, "timeoutSeconds")
        duration = (float(timeout) if timeout else _DEFAULT_WATCH_SECONDS) * sim.timeout_scale
        try:
            sub, _ = store.subscribe(res, namespace, matcher, since)
        except Expired as exc:
            if sim.expired_watch_as_status:
                raise _ApiError(410, "Expired", str(exc)) from exc
            sim._record("WATCH", self.path, 200)
            self._start_stream()
            event = {"type": "ERROR", "object": _status(410, "Expired", str(exc))}
            self._write_line(orjson.dumps(event) + b"\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        sim._record("WATCH", self.path, 200)
        try:
            self._start_stream()
            self._pump(sub, res, bookmarks, time.monotonic() + duration)
        finally:
            store.unsubscribe(sub)

    def _pump(self, sub: Subscription, res: ResourceType, bookmarks: bool, deadline: float) -> None:
        sim = self.server.sim
        last_bookmark = time.monotonic()
        while not sim._stopping.is_set():
            now = time.monotonic()
            if now >= deadline:
                break
            if sub.stalled:
                time.sleep(_POLL)
                continue
            item = None if sub.cut_requested else sub.get(min(_POLL, deadline - now))
            if sub.cut_requested:
                pending = item or sub.get(0)
                line = (
                    self._event_line(*pending)
                    if pending
                    else self._bookmark_line(res, sim.store.resource_version)
                )
                self._write_chunk(line[: max(1, len(line) // 2)])
                self._drop()
                return
            if item is not None:
                if sub.stalled:  # stalled while we waited: keep the event queued, send nothing
                    sub.unget(item)
                    continue
                self._write_line(self._event_line(*item))
                continue
            due = bookmarks and (
                sub.bookmark_requested or time.monotonic() - last_bookmark >= sim.bookmark_interval
            )
            if due:
                rv = sim.store.bookmark_rv(sub)
                if rv is not None:
                    sub.bookmark_requested = False
                    last_bookmark = time.monotonic()
                    self._write_line(self._bookmark_line(res, rv))
        if not sim._stopping.is_set():
            self.wfile.write(b"0\r\n\r\n")

    @staticmethod
    def _event_line(kind: str, obj: Object) -> bytes:
        return orjson.dumps({"type": kind, "object": obj}) + b"\n"

    @staticmethod
    def _bookmark_line(res: ResourceType, rv: int) -> bytes:
        obj = {
            "kind": res.kind,
            "apiVersion": res.api_version,
            "metadata": {"resourceVersion": str(rv)},
        }
        return orjson.dumps({"type": "BOOKMARK", "object": obj}) + b"\n"

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _parse(self, body: bytes) -> Any:
        try:
            return orjson.loads(body) if body else None
        except orjson.JSONDecodeError as exc:
            raise _ApiError(400, "BadRequest", f"invalid JSON: {exc}") from exc

    def _create(self, res: ResourceType, namespace: str, body: bytes) -> None:
        obj = self._parse(body)
        if not isinstance(obj, dict):
            raise _ApiError(400, "BadRequest", "body must be an object")
        meta = obj.setdefault("metadata", {})
        if res.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise _ApiError(
                    400, "BadRequest", "the namespace of the object does not match the path"
                )
            meta["namespace"] = namespace
        for key in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
            meta.pop(key, None)
        try:
            created = self.server.sim.cluster.create(res, obj)
        except Conflict as exc:
            raise _ApiError(409, "AlreadyExists", str(exc)) from exc
        except ValueError as exc:
            raise _ApiError(422, "Invalid", str(exc)) from exc
        self._send_json(201, created)

    def _patch(self, res: ResourceType, namespace: str, name: str, body: bytes) -> None:
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        patch = self._parse(body)
        if content_type == "application/json-patch+json":
            if not isinstance(patch, list):
                raise _ApiError(400, "BadRequest", "a JSON patch must be a list")
        elif content_type in (
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
            "application/json",
        ):
            if not isinstance(patch, dict):
                raise _ApiError(400, "BadRequest", "a merge patch must be an object")
        else:
            raise _ApiError(415, "UnsupportedMediaType", f"unsupported patch type {content_type!r}")
        precondition = (
            (patch.get("metadata") or {}).get("resourceVersion")
            if isinstance(patch, dict)
            else None
        )

        def mutate(obj: Object) -> Object:
            if precondition is not None and str(precondition) != obj["metadata"]["resourceVersion"]:
                raise Conflict(
                    "the object has been modified; please apply your changes to the latest version"
                )
            if isinstance(patch, list):
                result: Object = apply_json_patch(obj, patch)
                return result
            patched: Object = merge_patch(obj, patch)
            return patched

        try:
            updated = self.server.sim.cluster.update(res, namespace, name, mutate)
        except PatchError as exc:
            raise _ApiError(422, "Invalid", str(exc)) from exc
        except Conflict as exc:
            raise _ApiError(409, "Conflict", str(exc)) from exc
        self._send_json(200, updated)

    def _replace(self, res: ResourceType, namespace: str, name: str, body: bytes) -> None:
        obj = self._parse(body)
        if not isinstance(obj, dict):
            raise _ApiError(400, "BadRequest", "body must be an object")
        wanted = (obj.get("metadata") or {}).get("resourceVersion")

        def mutate(current: Object) -> Object:
            if wanted and str(wanted) != current["metadata"]["resourceVersion"]:
                raise Conflict(
                    "the object has been modified; please apply your changes to the latest version"
                )
            return obj

        try:
            updated = self.server.sim.cluster.update(res, namespace, name, mutate)
        except Conflict as exc:
            raise _ApiError(409, "Conflict", str(exc)) from exc
        self._send_json(200, updated)

    def _delete(
        self, res: ResourceType, namespace: str, name: str, body: bytes, query: dict[str, str]
    ) -> None:
        options = self._parse(body) or {}
        if not isinstance(options, dict):
            options = {}
        grace = self._int(query, "gracePeriodSeconds")
        if grace is None and options.get("gracePeriodSeconds") is not None:
            grace = int(options["gracePeriodSeconds"])
        propagation = query.get("propagationPolicy") or options.get("propagationPolicy")
        result = self.server.sim.cluster.delete(res, namespace, name, grace, propagation)
        if res.kind == "Pod":
            self._send_json(200, result)
        else:
            details = {"name": name, "kind": res.plural, "uid": result["metadata"]["uid"]}
            if res.group:
                details["group"] = res.group
            self._send_json(200, _status(200, "", "", details) | {"status": "Success"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], sim: KubeSim) -> None:
        self.sim = sim
        super().__init__(address, _Handler)


class KubeSim:
    """A stand-in Kubernetes API server on loopback, with virtual time and fault knobs.

    ``with KubeSim() as sim: client = Configuration(host=sim.url) ...``
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        epoch: datetime = DEFAULT_EPOCH,
        history_size: int = 10_000,
        bookmark_interval: float = 1.0,
        timeout_scale: float = 1.0,
        deterministic_uids: bool = True,
    ) -> None:
        self.clock = VirtualClock(epoch)
        self.store = Store(
            self.clock, history_size=history_size, deterministic_uids=deterministic_uids
        )
        self.cluster = Cluster(self.store)
        self.bookmark_interval = bookmark_interval
        self.timeout_scale = timeout_scale
        self.chunk_size: int | None = None
        self.expired_watch_as_status = False
        self.requests: list[RequestRecord] = []
        self._host, self._port = host, port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._failures: list[_Failure] = []
        self._lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> KubeSim:
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = _Server((self._host, self._port), self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="kubesim-http",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        for sub in self.store.subscriptions():
            sub.wake()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> KubeSim:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("kubesim is not running")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    # -- virtual time ----------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Move virtual time forward by `seconds` (fires graceful-deletion deadlines)."""
        self.cluster.advance(seconds)

    def advance_to(self, seconds: float) -> None:
        self.cluster.advance_to(seconds)

    # -- observation -----------------------------------------------------------------------

    def watch_count(self) -> int:
        return len(self.store.subscriptions())

    def watch_backlog(self) -> int:
        return self.store.watch_backlog()

    def wait_for_watches(self, count: int = 1, timeout: float = 5.0) -> bool:
        """Block until at least `count` watches are open (so a test can act after subscribing)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.watch_count() >= count:
                return True
            time.sleep(0.002)
        return False

    def wait_until_idle(self, timeout: float = 30.0) -> bool:
        """Block until every open, non-stalled watch has sent everything queued for it."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.watch_backlog() == 0:
                return True
            time.sleep(0.002)
        return False

    def _record(self, method: str, path: str, status: int) -> None:
        with self._lock:
            self.requests.append(RequestRecord(method, path, status))

    # -- fault knobs -----------------------------------------------------------------------

    def fail_next_requests(
        self, count: int, status: int = 429, retry_after: int | None = 1
    ) -> None:
        """Answer the next `count` requests with `status` (429 carries Retry-After)."""
        with self._lock:
            self._failures.append(_Failure(count, status, retry_after if status == 429 else None))

    def _take_failure(self) -> _Failure | None:
        with self._lock:
            while self._failures and self._failures[0].remaining <= 0:
                self._failures.pop(0)
            if not self._failures:
                return None
            failure = self._failures[0]
            failure.remaining -= 1
            return failure

    def cut_watches(self) -> int:
        """Every open watch sends half of its next line (an event, else a bookmark) and drops."""
        subs = self.store.subscriptions()
        for sub in subs:
            sub.cut_requested = True
            sub.wake()
        return len(subs)

    def stall_watches(self) -> int:
        """Every open watch keeps its connection but sends nothing more (events pile up)."""
        subs = self.store.subscriptions()
        for sub in subs:
            sub.stalled = True
        return len(subs)

    def resume_watches(self) -> None:
        for sub in self.store.subscriptions():
            sub.stalled = False
            sub.wake()

    def send_bookmarks(self) -> None:
        """Watches that allow bookmarks send one now (once their queue is empty)."""
        for sub in self.store.subscriptions():
            sub.bookmark_requested = True
            sub.wake()

    def compact(self) -> int:
        """Forget all history: a watch or continue token from any older revision gets 410."""
        self.store.compact()
        return self.store.resource_version

    def split_events(self, chunk_size: int | None) -> None:
        """Write each watch line as chunks of at most `chunk_size` bytes (None: one chunk)."""
        self.chunk_size = chunk_size
