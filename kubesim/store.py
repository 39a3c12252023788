"""The simulated cluster's object store: one global revision, a bounded event history, watches.

It plays etcd plus the API server's watch cache: every write bumps one integer
resourceVersion shared by all kinds, is recorded in a history of bounded length (so a watch
from an old revision can be answered with 410 Expired, as a real server does once its
cache has moved on), and is fanned out to the open watches.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from kubesim.clock import VirtualClock
from kubesim.resources import ResourceType
from kubesim.selectors import Matcher

__all__ = [
    "Conflict",
    "Expired",
    "NotFound",
    "Object",
    "Snapshot",
    "Store",
    "StoredEvent",
    "Subscription",
    "clone",
]

Object = dict[str, Any]
_UID_NAMESPACE = uuid.UUID("6c0b7d2e-7f3a-4c55-9a55-6b7375626573")


def clone(obj: Object) -> Object:
    """Deep copy of a JSON object (stored objects are never mutated in place)."""
    result: Object = orjson.loads(orjson.dumps(obj))
    return result


class Expired(Exception):
    """The requested resourceVersion is older than the retained history."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


class NotFound(KeyError):
    """No such object."""


class Conflict(Exception):
    """The object already exists, or a resourceVersion precondition failed."""


@dataclass(frozen=True)
class StoredEvent:
    rv: int
    resource: str
    type: str  # ADDED | MODIFIED | DELETED
    obj: Object
    prev: Object | None


@dataclass
class Snapshot:
    """A frozen LIST result, so continue tokens page through one consistent revision."""

    rv: int
    items: list[Object]


@dataclass(eq=False)
class Subscription:
    """One open watch: a queue of events plus the fault flags that apply to it."""

    resource: str
    namespace: str | None
    matcher: Matcher
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _queue: deque[tuple[str, Object]] = field(default_factory=deque)
    stalled: bool = False
    cut_requested: bool = False
    bookmark_requested: bool = False
    closed: bool = False

    def matches(self, obj: Object | None) -> bool:
        if obj is None:
            return False
        if (
            self.namespace is not None
            and obj.get("metadata", {}).get("namespace") != self.namespace
        ):
            return False
        return self.matcher(obj)

    def offer(self, event: StoredEvent) -> None:
        """Queue the event as this watch sees it (selector changes become ADDED/DELETED)."""
        if event.resource != self.resource:
            return
        now_in = self.matches(event.obj)
        if event.type == "MODIFIED":
            was_in = self.matches(event.prev)
            if now_in and not was_in:
                self.push("ADDED", event.obj)
            elif was_in and not now_in:
                self.push("DELETED", event.obj)
            elif now_in:
                self.push("MODIFIED", event.obj)
        elif now_in:
            self.push(event.type, event.obj)

    def push(self, kind: str, obj: Object) -> None:
        with self._cond:
            self._queue.append((kind, obj))
            self._cond.notify_all()

    def unget(self, item: tuple[str, Object]) -> None:
        with self._cond:
            self._queue.appendleft(item)

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def get(self, timeout: float) -> tuple[str, Object] | None:
        with self._cond:
            if not self._queue:
                self._cond.wait(timeout)
            if self._queue:
                return self._queue.popleft()
            return None

    def peek(self) -> tuple[str, Object] | None:
        with self._cond:
            return self._queue[0] if self._queue else None

    def backlog(self) -> int:
        with self._cond:
            return len(self._queue)


class Store:
    """Objects by resource, namespace and name, at one global revision."""

    def __init__(
        self,
        clock: VirtualClock,
        history_size: int = 10_000,
        deterministic_uids: bool = True,
        snapshot_cache: int = 32,
    ) -> None:
        self.clock = clock
        self.lock = threading.RLock()
        self.history_size = history_size
        self._deterministic_uids = deterministic_uids
        self._rv = 0
        self._floor = 0  # every event with rv > _floor is retained
        self._objects: dict[str, dict[tuple[str, str], Object]] = {}
        self._history: deque[StoredEvent] = deque()
        self._subs: set[Subscription] = set()
        self._snapshots: OrderedDict[str, Snapshot] = OrderedDict()
        self._snapshot_cache = snapshot_cache
        self._snapshot_seq = 0
        self.listeners: list[Callable[[StoredEvent], None]] = []

    # -- revisions and history -------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        with self.lock:
            return self._rv

    @property
    def oldest_resource_version(self) -> int:
        """Watches from this revision or newer can be served from history."""
        with self.lock:
            return self._floor

    def compact(self, keep: int = 0) -> None:
        """Drop history so that only the last `keep` events remain (0: forget everything)."""
        with self.lock:
            while len(self._history) > keep:
                self._floor = self._history.popleft().rv
            if keep == 0:
                self._floor = self._rv
            for key in [k for k, s in self._snapshots.items() if s.rv < self._floor]:
                del self._snapshots[key]

    def _record(self, resource: str, kind: str, obj: Object, prev: Object | None) -> None:
        event = StoredEvent(self._rv, resource, kind, obj, prev)
        self._history.append(event)
        while len(self._history) > self.history_size:
            self._floor = self._history.popleft().rv
        for sub in self._subs:
            sub.offer(event)
        for listener in self.listeners:
            listener(event)

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def check_rv(self, requested: int) -> None:
        with self.lock:
            if requested < self._floor:
                raise Expired(requested, self._floor)

    # -- reads -----------------------------------------------------------------------------

    def get(self, res: ResourceType, namespace: str, name: str) -> Object:
        with self.lock:
            obj = self._objects.get(res.key, {}).get((namespace, name))
            if obj is None:
                raise NotFound(name)
            return clone(obj)

    def find(self, res: ResourceType, namespace: str, name: str) -> Object | None:
        """The stored object itself (read-only!) or None."""
        with self.lock:
            return self._objects.get(res.key, {}).get((namespace, name))

    def items(self, res: ResourceType) -> list[Object]:
        """Stored objects of a kind, sorted by namespace and name (read-only!)."""
        with self.lock:
            table = self._objects.get(res.key, {})
            return [table[k] for k in sorted(table)]

    def iter_owned(self, res: ResourceType, owner_uid: str) -> Iterator[Object]:
        for obj in self.items(res):
            refs = obj.get("metadata", {}).get("ownerReferences") or []
            if any(r.get("uid") == owner_uid for r in refs):
                yield obj

    def snapshot(self, res: ResourceType) -> tuple[str, Snapshot]:
        with self.lock:
            self._snapshot_seq += 1
            token = str(self._snapshot_seq)
            snap = Snapshot(self._rv, self.items(res))
            self._snapshots[token] = snap
            while len(self._snapshots) > self._snapshot_cache:
                self._snapshots.popitem(last=False)
            return token, snap

    def find_snapshot(self, token: str, rv: int) -> Snapshot:
        with self.lock:
            if rv < self._floor:
                raise Expired(rv, self._floor)
            snap = self._snapshots.get(token)
            if snap is None or snap.rv != rv:
                raise Expired(rv, self._floor)
            return snap

    # -- writes ----------------------------------------------------------------------------

    def create(self, res: ResourceType, obj: Object) -> Object:
        """Store a new object; fills uid, creationTimestamp, resourceVersion, kind."""
        with self.lock:
            obj = clone(obj)
            meta = obj.setdefault("metadata", {})
            name = meta.get("name")
            if not name and meta.get("generateName"):
                name = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
                meta["name"] = name
            if not name:
                raise ValueError("metadata.name is required")
            namespace = meta.get("namespace", "") if res.namespaced else ""
            if res.namespaced:
                if not namespace:
                    raise ValueError("metadata.namespace is required")
            else:
                meta.pop("namespace", None)
            table = self._objects.setdefault(res.key, {})
            if (namespace, name) in table:
                raise Conflict(f'{res.plural} "{name}" already exists')
            rv = self._next_rv()
            obj["apiVersion"] = res.api_version
            obj["kind"] = res.kind
            if self._deterministic_uids:
                uid = uuid.uuid5(_UID_NAMESPACE, f"{res.key}/{namespace}/{name}/{rv}")
            else:
                uid = uuid.uuid4()
            meta["uid"] = str(uid)
            meta.setdefault("creationTimestamp", self.clock.timestamp())
            meta["resourceVersion"] = str(rv)
            meta.setdefault("generation", 1)
            table[(namespace, name)] = obj
            self._record(res.key, "ADDED", obj, None)
            return clone(obj)

    def update(
        self,
        res: ResourceType,
        namespace: str,
        name: str,
        mutate: Callable[[Object], Object | None],
    ) -> tuple[Object, Object]:
        """Apply `mutate` to a copy; store it with a new revision if it changed.

        Returns (old, new); identity fields cannot be changed by `mutate`.
        """
        with self.lock:
            table = self._objects.get(res.key, {})
            old = table.get((namespace, name))
            if old is None:
                raise NotFound(name)
            draft = clone(old)
            returned = mutate(draft)
            new = returned if isinstance(returned, dict) else draft
            meta = new.setdefault("metadata", {})
            for key in ("name", "namespace", "uid", "creationTimestamp", "resourceVersion"):
                if key in old["metadata"]:
                    meta[key] = old["metadata"][key]
            new["apiVersion"], new["kind"] = old["apiVersion"], old["kind"]
            if new == old:
                return clone(old), clone(old)
            if new.get("spec") != old.get("spec"):
                meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
            meta["resourceVersion"] = str(self._next_rv())
            table[(namespace, name)] = new
            self._record(res.key, "MODIFIED", new, old)
            return clone(old), clone(new)

    def delete(
        self,
        res: ResourceType,
        namespace: str,
        name: str,
        final: Callable[[Object], Object | None] | None = None,
    ) -> Object:
        """Remove an object; `final` may adjust the body carried by the DELETED event."""
        with self.lock:
            table = self._objects.get(res.key, {})
            old = table.pop((namespace, name), None)
            if old is None:
                raise NotFound(name)
            body = clone(old)
            if final is not None:
                returned = final(body)
                body = returned if isinstance(returned, dict) else body
            if res.key != "pods":
                # as after a foreground deletion: the final body says when it went (watchers
                # date JobDeleted / NodeRemoved from it, so a replay is reproducible)
                body["metadata"].setdefault("deletionTimestamp", self.clock.timestamp())
            body["metadata"]["resourceVersion"] = str(self._next_rv())
            self._record(res.key, "DELETED", body, old)
            return clone(body)

    # -- watches ---------------------------------------------------------------------------

    def subscribe(
        self,
        res: ResourceType,
        namespace: str | None,
        matcher: Matcher,
        since: int | None,
    ) -> tuple[Subscription, int]:
        """Open a watch. `since=None` starts with synthetic ADDED events for current objects.

        Returns the subscription and the revision it starts from. Raises Expired.
        """
        with self.lock:
            sub = Subscription(res.key, namespace, matcher)
            if since is None:
                for obj in self.items(res):
                    if sub.matches(obj):
                        sub.push("ADDED", obj)
            else:
                if since < self._floor:
                    raise Expired(since, self._floor)
                for event in self._history:
                    if event.rv > since:
                        sub.offer(event)
            self._subs.add(sub)
            return sub, self._rv

    def unsubscribe(self, sub: Subscription) -> None:
        with self.lock:
            sub.closed = True
            self._subs.discard(sub)

    def subscriptions(self) -> list[Subscription]:
        with self.lock:
            return list(self._subs)

    def bookmark_rv(self, sub: Subscription) -> int | None:
        """The global revision, if `sub` has nothing queued (so no event can be skipped)."""
        with self.lock:
            return None if sub.backlog() else self._rv

    def watch_backlog(self, *, stalled: bool = False) -> int:
        """Events queued but not yet sent, over every watch that is not stalled (with
        ``stalled``: over every watch)."""
        with self.lock:
            return sum(s.backlog() for s in self._subs if stalled or not s.stalled)
