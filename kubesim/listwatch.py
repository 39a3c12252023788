"""The read side of the API server: LIST with pagination, WATCH as chunked JSON lines.

A LIST pages a consistent snapshot through continue tokens (410 Expired once its revision is
compacted away); a WATCH streams events from a resourceVersion with bookmarks, and obeys the
fault knobs (:mod:`kubesim.faults`): stalled, cut mid-line, split into small chunks.
"""

from __future__ import annotations

import base64
import contextlib
import socket
import time

import orjson

from kubesim.protocol import ApiError, HandlerBase, status_body
from kubesim.resources import ResourceType
from kubesim.store import Expired, Object, Subscription

__all__ = ["ListWatchVerbs"]

_DEFAULT_WATCH_SECONDS = 1800.0
_POLL = 0.02


def _encode_continue(token: str, rv: int, offset: int) -> str:
    raw = orjson.dumps({"t": token, "rv": rv, "o": offset})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(text: str) -> tuple[str, int, int]:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        data = orjson.loads(raw)
        return str(data["t"]), int(data["rv"]), int(data["o"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ApiError(400, "BadRequest", f"invalid continue token: {exc}") from exc


class ListWatchVerbs(HandlerBase):
    """LIST and WATCH of a collection."""

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
                    raise ApiError(
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
            raise ApiError(410, "Expired", str(exc)) from exc
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
                raise ApiError(410, "Expired", str(exc)) from exc
            sim.record("WATCH", self.path, 200)
            self._start_stream()
            event = {"type": "ERROR", "object": status_body(410, "Expired", str(exc))}
            self._write_line(orjson.dumps(event) + b"\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        sim.record("WATCH", self.path, 200)
        try:
            self._start_stream()
            self._pump(sub, res, bookmarks, time.monotonic() + duration)
        finally:
            store.unsubscribe(sub)

    def _pump(self, sub: Subscription, res: ResourceType, bookmarks: bool, deadline: float) -> None:
        sim = self.server.sim
        last_bookmark = time.monotonic()
        while not sim.stopping.is_set():
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
        if not sim.stopping.is_set():
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
