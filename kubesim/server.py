"""The loopback API server: its lifecycle, virtual time and what a test observes.

It speaks enough of the API server's protocol for the official `kubernetes` client and the
watchers to run unchanged: discovery and routing (:mod:`kubesim.routes`), LIST with pagination
and WATCH as chunked JSON lines with bookmarks and 410 Expired (:mod:`kubesim.listwatch`),
POST, merge/JSON PATCH, PUT and (graceful) DELETE (:mod:`kubesim.writes`); plus fault knobs
that tests call to break watches, rate-limit or fail requests and compact history
(:mod:`kubesim.faults`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime
from http.server import ThreadingHTTPServer
from types import TracebackType

from kubesim.clock import DEFAULT_EPOCH, VirtualClock
from kubesim.cluster import Cluster
from kubesim.faults import FaultKnobs
from kubesim.routes import Handler
from kubesim.store import Store

__all__ = ["KubeSim", "RequestRecord", "SimServer"]


@dataclass(frozen=True)
class RequestRecord:
    """One answered request, as a test inspects it (a watch is recorded as ``WATCH``)."""

    method: str
    path: str
    status: int


class SimServer(ThreadingHTTPServer):
    """The HTTP server; its handlers reach the simulator as ``self.server.sim``."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], sim: KubeSim) -> None:
        self.sim = sim
        super().__init__(address, Handler)


class KubeSim(FaultKnobs):
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
        super().__init__()
        self.clock = VirtualClock(epoch)
        self.store = Store(
            self.clock, history_size=history_size, deterministic_uids=deterministic_uids
        )
        self.cluster = Cluster(self.store)
        self.bookmark_interval = bookmark_interval
        self.timeout_scale = timeout_scale
        self.requests: list[RequestRecord] = []
        self._host, self._port = host, port
        self._server: SimServer | None = None
        self._thread: threading.Thread | None = None
        self.stopping = threading.Event()  # set by stop(): open watch streams end
        self._lock = threading.Lock()
        self._date: datetime | None = None
        self._date_hidden = False
        self._date_changed = threading.Condition()

    # -- the clock as clients see it -------------------------------------------------------

    def served_now(self) -> datetime:
        """The instant every answer's ``Date`` header carries, as an API server's carries its
        clock: the virtual clock, unless :meth:`hold_date` holds it."""
        with self._date_changed:
            held = self._date
        return held if held is not None else self.clock.now()

    def hold_date(self, at: datetime | None) -> None:
        """Show clients ``at`` as the cluster's time (None: the virtual clock again), and
        answer ``/version`` again if :meth:`hide_date` held it."""
        with self._date_changed:
            self._date, self._date_hidden = at, False
            self._date_changed.notify_all()

    def hide_date(self) -> None:
        """Until the next :meth:`hold_date`, ``GET /version`` (what a client reads the
        cluster's time with: ``dispatch --clock server``) waits. A lockstep driver moves the
        cluster while hidden and shows the new instant once what it wrote there has gone
        through the pipeline, so no clock read can meet a cluster half-way to an instant."""
        with self._date_changed:
            self._date_hidden = True

    def wait_for_date(self, timeout: float = 60.0) -> None:
        """Called by ``/version`` before it answers (see :meth:`hide_date`)."""
        with self._date_changed:
            self._date_changed.wait_for(
                lambda: not self._date_hidden or self.stopping.is_set(), timeout
            )

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> KubeSim:
        if self._server is not None:
            return self
        self.stopping.clear()
        self._server = SimServer((self._host, self._port), self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="kubesim-http",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.hold_date(self._date)  # a /version waiting for the date answers
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

    def watch_backlog(self, *, stalled: bool = False) -> int:
        """Events queued but not yet sent (``stalled``: also those a stalled watch holds)."""
        return self.store.watch_backlog(stalled=stalled)

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

    def record(self, method: str, path: str, status: int) -> None:
        """Called by the handlers as they answer (before the client can see the answer)."""
        with self._lock:
            self.requests.append(RequestRecord(method, path, status))
