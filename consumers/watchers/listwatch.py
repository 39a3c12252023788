"""The list-then-watch loop for one resource type, as client-go's reflector runs it.

LIST (paginated) gives the state and a resourceVersion; WATCH from there streams changes,
with bookmarks moving the resourceVersion while nothing changes. A stream that ends cleanly
(the server's ``timeoutSeconds``) or breaks (connection cut mid-chunk, client read timeout on a
stalled stream) resumes from the last resourceVersion without relisting; only 410 Expired (as
an ERROR event or an HTTP status) forces a relist, which the sink reconciles against what it
knew. Server errors (5xx), 429 (Retry-After honoured) and watches that end at once back off
exponentially with jitter, so a sick API server never sees a hot loop.

Requests go through the official ``kubernetes`` client (its configuration, auth and HTTP pool)
with ``_preload_content=False``: the watcher parses raw JSON lines itself, which is several
times faster than the client's model objects, splits lines only on complete bytes (an event
split across chunks, even inside a multi-byte UTF-8 character, parses) and gets bookmarks as
plain dicts.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from consumers.watchers.selectors import LabelSelector
from ledger.errors import Invalid

__all__ = [
    "DEFAULT_RESOURCES",
    "ListWatch",
    "ListWatchStats",
    "WatchSettings",
    "WatchSink",
    "WatchedResource",
    "resource_named",
]

log = logging.getLogger(__name__)

Object = dict[str, Any]


@dataclass(frozen=True, slots=True)
class WatchedResource:
    """A resource type the watcher follows; ``name`` keys its resourceVersion checkpoint."""

    name: str  # "pods", "nodes", "batch/jobs", "kubeflow.org/pytorchjobs"
    kind: str
    group: str
    version: str
    plural: str

    @property
    def tracker_resource(self) -> str:
        if self.plural in ("pods", "nodes"):
            return self.plural
        return "workloads" if self.plural in _WORKLOAD_PLURALS else "jobs"


PODS = WatchedResource("pods", "Pod", "", "v1", "pods")
NODES = WatchedResource("nodes", "Node", "", "v1", "nodes")
JOBS = WatchedResource("batch/jobs", "Job", "batch", "v1", "jobs")
PYTORCHJOBS = WatchedResource(
    "kubeflow.org/pytorchjobs", "PyTorchJob", "kubeflow.org", "v1", "pytorchjobs"
)
TFJOBS = WatchedResource("kubeflow.org/tfjobs", "TFJob", "kubeflow.org", "v1", "tfjobs")
MPIJOBS = WatchedResource("kubeflow.org/mpijobs", "MPIJob", "kubeflow.org", "v1", "mpijobs")
# services and notebooks (docs/workloads.md)
DEPLOYMENTS = WatchedResource("apps/deployments", "Deployment", "apps", "v1", "deployments")
STATEFULSETS = WatchedResource("apps/statefulsets", "StatefulSet", "apps", "v1", "statefulsets")
LEADERWORKERSETS = WatchedResource(
    "leaderworkerset.x-k8s.io/leaderworkersets",
    "LeaderWorkerSet",
    "leaderworkerset.x-k8s.io",
    "v1",
    "leaderworkersets",
)
_WORKLOAD_PLURALS = frozenset({"deployments", "statefulsets", "leaderworkersets"})

#: Watched by default, in start order (nodes, jobs and workloads first so pods find their
#: owners).
DEFAULT_RESOURCES: tuple[WatchedResource, ...] = (
    NODES,
    JOBS,
    PYTORCHJOBS,
    TFJOBS,
    MPIJOBS,
    DEPLOYMENTS,
    STATEFULSETS,
    LEADERWORKERSETS,
    PODS,
)


def resource_named(name: str) -> WatchedResource:
    for res in DEFAULT_RESOURCES:
        if name in (res.name, res.plural, res.kind.lower()):
            return res
    raise Invalid(f"unknown resource {name!r}; known: {[r.name for r in DEFAULT_RESOURCES]}")


@dataclass(slots=True)
class WatchSettings:
    """Timings of the loop. Defaults suit a real cluster; tests shrink them."""

    page_size: int = 500
    timeout_seconds: int = 300  # server side: the API server ends the watch cleanly
    read_timeout: float = 330.0  # client side: a stream silent this long is dead
    connect_timeout: float = 10.0
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    short_watch: float = 1.0  # a watch that ends this fast with no events counts as a failure
    resync_seconds: float | None = 600.0  # periodic relist (drift repair); None = never
    label_selector: str | None = None
    field_selector: str | None = None


@dataclass(slots=True)
class ListWatchStats:
    lists: int = 0
    pages: int = 0
    watches: int = 0
    events: int = 0
    bookmarks: int = 0
    expired: int = 0
    reconnects: int = 0
    errors: int = 0
    backoffs: list[float] = field(default_factory=list)


class WatchSink(Protocol):
    """Where a loop delivers what it reads (the watcher: tracker + publisher)."""

    def listed(self, res: WatchedResource, items: list[Object], rv: int, resync: bool) -> None: ...

    def event(self, res: WatchedResource, kind: str, obj: Object, rv: int) -> None: ...

    def bookmark(self, res: WatchedResource, rv: int) -> None: ...


class _Expired(Exception):
    """410 Gone / Expired: the resourceVersion left the server's window."""


class _StreamError(Exception):
    def __init__(self, status: Mapping[str, Any]) -> None:
        super().__init__(str(status.get("message") or status))
        self.code = int(status.get("code") or 500)


def _retry_after(exc: ApiException) -> float | None:
    headers = exc.headers or {}
    value = headers.get("Retry-After") or headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class ListWatch:
    """One resource type's reflector loop; ``run(stop)`` until ``stop`` is set."""

    def __init__(
        self,
        api: client.ApiClient,
        res: WatchedResource,
        sink: WatchSink,
        *,
        settings: WatchSettings | None = None,
        start_rv: int | None = None,
        sleep: Callable[[float], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.api = api
        self.res = res
        self.sink = sink
        self.settings = settings or WatchSettings()
        self.rv = start_rv
        self.monotonic = monotonic
        self.rng = rng or random.Random()
        self.stats = ListWatchStats()
        self.selector = LabelSelector(self.settings.label_selector)
        self._sleep = sleep
        self._stop = threading.Event()
        self._response: Any = None
        self._failures = 0
        self._next_resync: float | None = None
        self.synced = threading.Event()  # set after the first LIST (or first resumed watch)

    # -- control ---------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):
                response.shutdown()

    @property
    def watching(self) -> bool:
        """A watch stream is open right now (the server has subscribed it)."""
        return self._response is not None

    def sleep(self, seconds: float) -> None:
        self.stats.backoffs.append(seconds)
        if self._sleep is not None:
            self._sleep(seconds)
        else:
            self._stop.wait(seconds)

    def backoff_delay(self) -> float:
        """Exponential in the consecutive failures, with equal jitter."""
        s = self.settings
        base = min(s.backoff_max, s.backoff_initial * 2.0 ** max(0, self._failures - 1))
        return float(base / 2 + self.rng.uniform(0, base / 2))

    def run(self, stop: threading.Event | None = None) -> None:
        stop = stop or self._stop
        while not stop.is_set() and not self._stop.is_set():
            try:
                self.step()
            except Exception:  # never let one bad object kill the watcher
                log.exception("%s: unexpected error; backing off", self.res.name)
                self._failures += 1
                self.stats.errors += 1
                self.sleep(self.backoff_delay())

    def step(self) -> None:
        """One LIST if needed, then one WATCH; errors become backoff or relist."""
        s = self.settings
        try:
            resync_due = (
                self._next_resync is not None
                and s.resync_seconds is not None
                and self.monotonic() >= self._next_resync
            )
            if self.rv is None or resync_due:
                self._list(resync=resync_due and self.rv is not None)
            self.synced.set()
            started = self.monotonic()
            count = self._watch()
            if self._stop.is_set():
                return
            if count == 0 and self.monotonic() - started < s.short_watch:
                self._failures += 1
                self.sleep(self.backoff_delay())
            else:
                self._failures = 0
        except _Expired:
            self.stats.expired += 1
            log.info("%s: resourceVersion %s expired; relisting", self.res.name, self.rv)
            if self.rv is None:  # expired during the LIST itself: do not spin
                self._failures += 1
                self.sleep(self.backoff_delay())
            self.rv = None
        except ApiException as exc:
            if exc.status == 410:
                self.stats.expired += 1
                log.info("%s: 410 from the API server; relisting", self.res.name)
                self.rv = None
                return
            self._failures += 1
            self.stats.errors += 1
            wait = _retry_after(exc) if exc.status == 429 else None
            delay = max(wait or 0.0, self.backoff_delay())
            log.warning("%s: API error %s; retrying in %.2fs", self.res.name, exc.status, delay)
            self.sleep(delay)
        except _StreamError as exc:
            self._failures += 1
            self.stats.errors += 1
            log.warning("%s: watch error %s: %s", self.res.name, exc.code, exc)
            self.sleep(self.backoff_delay())
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if self._stop.is_set():
                return
            # a stalled stream (read timeout) or a cut connection: resume from the last rv
            self.stats.reconnects += 1
            self._failures += 1
            delay = self.backoff_delay() if self._failures > 1 else 0.0
            log.info("%s: watch connection lost (%s); resuming", self.res.name, type(exc).__name__)
            if delay:
                self.sleep(delay)

    # -- HTTP ------------------------------------------------------------------------------

    def _call(self, **params: Any) -> Any:
        s = self.settings
        if s.label_selector:
            params["label_selector"] = s.label_selector
        if s.field_selector:
            params["field_selector"] = s.field_selector
        params["_preload_content"] = False
        res = self.res
        if res.plural == "pods":
            return client.CoreV1Api(self.api).list_pod_for_all_namespaces(**params)
        if res.plural == "nodes":
            return client.CoreV1Api(self.api).list_node(**params)
        if res.group == "batch":
            return client.BatchV1Api(self.api).list_job_for_all_namespaces(**params)
        return client.CustomObjectsApi(self.api).list_cluster_custom_object(
            res.group, res.version, res.plural, **params
        )

    def _list(self, *, resync: bool) -> None:
        s = self.settings
        items: list[Object] = []
        token: str | None = None
        rv = 0
        timeout = (s.connect_timeout, max(s.read_timeout, 60.0))
        while True:
            params: dict[str, Any] = {"limit": s.page_size, "_request_timeout": timeout}
            if token:
                params["_continue"] = token
            try:
                response = self._call(**params)
            except ApiException as exc:
                if exc.status == 410 and token:
                    # the snapshot behind the continue token is gone: start the list over
                    items, token = [], None
                    self.stats.expired += 1
                    continue
                raise
            try:
                body = orjson.loads(response.data)
            finally:
                response.release_conn()
            self.stats.pages += 1
            items.extend(body.get("items") or ())
            meta = body.get("metadata") or {}
            rv = int(meta.get("resourceVersion") or 0)
            token = meta.get("continue") or None
            if not token:
                break
        self.stats.lists += 1
        kind = self.res.kind
        for item in items:  # list items carry no kind
            item.setdefault("kind", kind)
        self.sink.listed(self.res, items, rv, resync)
        self.rv = rv
        if s.resync_seconds is not None:
            self._next_resync = self.monotonic() + s.resync_seconds

    def _watch(self) -> int:
        s = self.settings
        timeout_seconds = s.timeout_seconds
        if s.resync_seconds is not None and self._next_resync is not None:
            left = self._next_resync - self.monotonic()
            timeout_seconds = max(1, min(timeout_seconds, int(left) + 1))
        response = self._call(
            watch=True,
            resource_version=str(self.rv),
            allow_watch_bookmarks=True,
            timeout_seconds=timeout_seconds,
            _request_timeout=(s.connect_timeout, s.read_timeout),
        )
        self.stats.watches += 1
        self._response = response
        count = 0
        try:
            for line in _lines(response):
                if self._stop.is_set():
                    break
                count += 1
                self._handle(orjson.loads(line))
        finally:
            self._response = None
            with contextlib.suppress(Exception):
                response.release_conn()
        return count

    def _handle(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            if int(obj.get("code") or 0) == 410:
                raise _Expired(obj.get("message"))
            raise _StreamError(obj)
        rv = int((obj.get("metadata") or {}).get("resourceVersion") or 0)
        if kind == "BOOKMARK":
            self.stats.bookmarks += 1
            if rv:
                self.rv = rv
                self.sink.bookmark(self.res, rv)
            return
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            log.warning("%s: unknown watch event type %r ignored", self.res.name, kind)
            return
        self.stats.events += 1
        obj.setdefault("kind", self.res.kind)
        if kind == "DELETED" and not self.selector.matches(obj):
            # the object left the label selector: out of scope, not deleted
            kind = "OUT_OF_SCOPE"
        self.sink.event(self.res, str(kind), obj, rv)
        if rv:
            self.rv = rv


def _lines(response: Any) -> Iterator[bytes]:
    """Complete lines of a chunked stream; bytes are only decoded once a line is whole."""
    buffer = bytearray()
    for segment in response.stream(amt=None, decode_content=False):
        if not segment:
            continue
        buffer += segment
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            if end < 0:
                break
            line = bytes(buffer[start:end])
            start = end + 1
            if line.strip():
                yield line
        if start:
            del buffer[:start]
    if buffer.strip():
        yield bytes(buffer)
