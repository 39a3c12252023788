"""Running several long-lived components on threads of one process, as one service.

``dlc-ledger up`` runs the watcher, ingest, projector, billing, dispatcher and API side by
side. Each is a :class:`Component`: a ``run(stop)`` that blocks until the shared ``stop``
event is set (the existing runners all take one). The :class:`Supervisor` starts them in
order, waits for each to say it is ready, and treats a component that raises, or returns
while nothing asked it to stop, as the failure of the whole service: ``stop`` is set, every
other component winds down, and :meth:`Supervisor.run` raises :class:`ComponentFailed`
naming it. Threads rather than child processes: one process to Ctrl-C, no orphan left
behind when it dies, and one Prometheus registry (the API's ``/metrics`` shows every
component's figures).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ledger.errors import Unavailable

__all__ = ["Component", "ComponentFailed", "Supervisor"]

log = logging.getLogger(__name__)


class ComponentFailed(Unavailable):
    """A component raised or stopped by itself; the message names it."""

    def __init__(self, name: str, cause: BaseException | None) -> None:
        reason = "stopped unexpectedly" if cause is None else _describe(cause)
        super().__init__(f"{name} failed: {reason}")
        self.component = name
        self.cause = cause


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


@dataclass
class Component:
    """A long-running part: ``run(stop, ready)`` blocks until ``stop`` is set and sets
    ``ready`` once it serves. ``halt`` (optional) is called when the service stops, for a
    runner that watches a flag of its own instead of ``stop`` (uvicorn's ``should_exit``).
    ``may_finish``: returning before ``stop`` is normal (a trace that has been played)."""

    name: str
    run: Callable[[threading.Event, threading.Event], object]
    halt: Callable[[], None] | None = None
    may_finish: bool = False
    ready: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


class Supervisor:
    """Starts components in order and keeps them running until ``stop`` or a failure."""

    def __init__(self, stop: threading.Event | None = None, *, join_timeout: float = 15.0) -> None:
        self.stop = stop or threading.Event()
        self.join_timeout = join_timeout
        self.components: list[Component] = []
        self._failure: ComponentFailed | None = None
        self._lock = threading.Lock()

    @property
    def failure(self) -> ComponentFailed | None:
        with self._lock:
            return self._failure

    def _fail(self, name: str, cause: BaseException | None) -> None:
        with self._lock:
            if self._failure is None and not self.stop.is_set():
                self._failure = ComponentFailed(name, cause)
                log.info("%s: stopping the other components", self._failure)
        self.stop.set()

    def _body(self, component: Component) -> None:
        try:
            component.run(self.stop, component.ready)
        except BaseException as exc:  # SystemExit too: uvicorn exits when it cannot start
            self._fail(component.name, exc)
            return
        if not self.stop.is_set() and not component.may_finish:
            self._fail(component.name, None)

    def start(self, component: Component, *, ready_timeout: float = 120.0) -> None:
        """Start ``component`` and wait until it is ready; raises if it (or another) fails
        first, or if ``stop`` is set meanwhile (a signal during start-up)."""
        self.components.append(component)
        component.thread = threading.Thread(
            target=self._body, args=(component,), name=f"up-{component.name}", daemon=True
        )
        component.thread.start()
        deadline = time.monotonic() + ready_timeout
        while not component.ready.wait(0.05):
            self.raise_failure()
            if self.stop.is_set() or not component.thread.is_alive():
                if component.may_finish and not component.thread.is_alive():
                    return
                raise KeyboardInterrupt  # stopped by a signal before it was ready
            if time.monotonic() > deadline:
                self._fail(component.name, TimeoutError(f"not ready within {ready_timeout:.0f}s"))
                self.raise_failure()

    def raise_failure(self) -> None:
        failure = self.failure
        if failure is not None:
            raise failure

    def wait(self) -> None:
        """Block until ``stop`` is set; raises :class:`ComponentFailed` on a failure."""
        while not self.stop.wait(0.2):
            pass
        self.raise_failure()

    def shutdown(self) -> list[str]:
        """Stop every component, newest first; the names of those that did not stop in
        time (their threads are daemons: the process still exits)."""
        self.stop.set()
        stuck: list[str] = []
        for component in reversed(self.components):
            if component.halt is not None:
                try:
                    component.halt()
                except Exception:  # a component half started: stopping it must go on
                    log.exception("stopping %s", component.name)
            if component.thread is not None:
                component.thread.join(self.join_timeout)
                if component.thread.is_alive():
                    stuck.append(component.name)
        return stuck
