"""A real HTTP receiver on loopback: records each request, answers as it is told."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

__all__ = ["Received", "Receiver"]


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


@dataclass
class Receiver:
    """``answers``: status codes to give in turn (then 200); ``retry_after`` with a 5xx or
    a 429; ``location`` with a 3xx."""

    answers: list[int] = field(default_factory=list)
    retry_after: str | None = None
    location: str | None = None  # sent with a 3xx
    delay: float = 0.0  # seconds before answering (a slow receiver)
    received: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                if owner.delay:
                    time.sleep(owner.delay)
                with owner._lock:
                    owner.received.append(
                        Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    status = owner.answers.pop(0) if owner.answers else 200
                self.send_response(status)
                if (status >= 500 or status == 429) and owner.retry_after:
                    self.send_header("Retry-After", owner.retry_after)
                if 300 <= status < 400 and owner.location:
                    self.send_header("Location", owner.location)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
