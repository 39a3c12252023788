"""The fault knobs: what a test turns to break the API server on purpose.

Injected failures (429 with Retry-After, 5xx), watches cut mid-line, stalled or resumed,
bookmarks on demand, history compacted (410 Expired), watch lines split into small chunks.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from kubesim.store import Store

__all__ = ["Failure", "FaultKnobs"]


@dataclass
class Failure:
    """The next ``remaining`` requests (of ``methods``, None: any) are answered with
    ``status``."""

    remaining: int
    status: int
    retry_after: int | None
    methods: frozenset[str] | None = None


class FaultKnobs:
    """Mixed into :class:`kubesim.KubeSim`: the knobs over its store's watches and requests."""

    store: Store

    def __init__(self) -> None:
        self.chunk_size: int | None = None
        self.expired_watch_as_status = False
        self._failures: list[Failure] = []
        self._failures_lock = threading.Lock()

    def fail_next_requests(
        self,
        count: int,
        status: int = 429,
        retry_after: int | None = 1,
        *,
        methods: frozenset[str] | None = None,
    ) -> None:
        """Answer the next `count` requests (of `methods`, e.g. ``{"PATCH"}``; None: any)
        with `status` (429 carries Retry-After)."""
        with self._failures_lock:
            self._failures.append(
                Failure(count, status, retry_after if status == 429 else None, methods)
            )

    def take_failure(self, method: str = "GET") -> Failure | None:
        """The injected failure a `method` request is to get, if any (counted down)."""
        with self._failures_lock:
            self._failures = [f for f in self._failures if f.remaining > 0]
            for failure in self._failures:
                if failure.methods is None or method in failure.methods:
                    failure.remaining -= 1
                    return failure
            return None

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
