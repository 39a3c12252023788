"""The cluster of a run: kubesim replaying a slice of openb, paced on the wall clock.

The slice is the first ``limit`` pods created at or after a trace second (the openb file's
rows are not in time order, and its first rows spread over four months, so ``--limit`` over
the file's order would leave most of a paced run idle). The replay ends at a horizon: the
slice's last action, or the last creation plus the slice's own length if a pod runs longer
(it stays open at the end, the same in both runs). kubesim runs in the driver's process so
that its fault knobs are at hand; cluster time is the trace's (every timestamp kubesim
writes is an action's second), so two runs of one slice write the same facts whatever their
pace.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from consumers.watchers import DEFAULT_RESOURCES
from kubesim.clock import DEFAULT_EPOCH
from kubesim.driver import TraceDriver
from kubesim.server import KubeSim
from kubesim.traces import Trace, load_trace

__all__ = ["DEFAULT_START", "ClusterReplay", "Replay", "Slice", "openb_slice"]

#: where openb's pods are dense (a pod every few hundred seconds, most ending within a day)
DEFAULT_START = 10_000_000
#: the watcher's resources: one watch each, all open before a run counts as quiet (a stale
#: count let a run end while the pods' watch was still reconnecting after a cut)
WATCHES = len(DEFAULT_RESOURCES)


@dataclass(frozen=True)
class Slice:
    trace: Trace
    start: int  # trace second of the first creation
    horizon: int  # trace second the replay ends at

    @property
    def pods(self) -> int:
        return len(self.trace.instances)

    def at(self, second: float) -> datetime:
        return self.trace.epoch + timedelta(seconds=second)


def openb_slice(limit: int, start: int = DEFAULT_START) -> Slice:
    full = load_trace("openb", DEFAULT_EPOCH)
    chosen = sorted(
        (i for i in full.instances if i.created >= start), key=lambda i: (i.created, i.job_name)
    )[:limit]
    if not chosen:
        raise ValueError(f"no openb pod is created at or after second {start}")
    first, last = chosen[0].created, chosen[-1].created
    ends = [t for i in chosen for t in (i.created, i.scheduled, i.deleted) if t is not None]
    horizon = min(max(ends), last + max(last - first, 3600))
    # keep the chosen instances in the file's order (the driver sorts the actions anyway)
    names = {i.job_name for i in chosen}
    trace = replace(full, instances=tuple(i for i in full.instances if i.job_name in names))
    return Slice(trace, first, horizon)


class ClusterReplay:
    """What both replays share: kubesim in the driver's process, a thread that plays the
    slice from :meth:`go` and sets ``done``, and what the faults read of the cluster.
    Subclasses play (``_play``) and, when their thread can wait on a hold, wake it
    (``_wake``)."""

    thread_name = "chaos-replay"

    def __init__(self, chosen: Slice) -> None:
        self.slice = chosen
        self.sim = KubeSim(history_size=100_000).start()
        self.done = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started_at = 0.0

    @property
    def url(self) -> str:
        return self.sim.url

    def watches(self) -> list[object]:
        """The open watches (a resumed or new watch is a new one)."""
        return list(self.sim.store.subscriptions())

    def lists_since(self, mark: int) -> int:
        """LIST requests answered 200 since request number ``mark``."""
        return sum(
            1 for r in self.sim.requests[mark:]
            if r.method == "GET" and "watch=" not in r.path and r.status == 200
        )  # fmt: skip

    def go(self) -> None:
        self.started_at = time.monotonic()
        self._thread = threading.Thread(target=self._play, name=self.thread_name, daemon=True)
        self._thread.start()

    def elapsed(self) -> float:
        return time.monotonic() - self.started_at if self.started_at else 0.0

    def _play(self) -> None:
        raise NotImplementedError

    def _wake(self) -> None:
        """Unblock the playing thread if it waits (the stop event is set)."""

    def stop(self) -> None:
        self._stop.set()
        self._wake()
        if self._thread is not None:
            self._thread.join(10)
        self.sim.stop()


class Replay(ClusterReplay):
    """kubesim (its nodes registered at once) and a thread playing the slice at ``speed``
    cluster seconds per wall second from :meth:`go` until the horizon."""

    def __init__(self, chosen: Slice, speed: float) -> None:
        super().__init__(chosen)
        self.speed = speed
        self.driver = TraceDriver(self.sim, chosen.trace, "max", prime=True)
        self._holds = 0
        self._held_since: float | None = None
        self._held_total = 0.0
        self._hold_lock = threading.Lock()

    @property
    def wall_seconds(self) -> float:
        """How long the replay takes on the wall clock."""
        return (self.slice.horizon - self.slice.start) / self.speed

    def hold(self) -> None:
        """Stop cluster time (nothing happens on the cluster) until :meth:`release`; the
        replay then goes on from where it stood, its wall schedule shifted by the hold."""
        with self._hold_lock:
            self._holds += 1
            if self._held_since is None:
                self._held_since = time.monotonic()

    def release(self) -> None:
        with self._hold_lock:
            self._holds = max(0, self._holds - 1)
            if self._holds == 0 and self._held_since is not None:
                self._held_total += time.monotonic() - self._held_since
                self._held_since = None

    def _play(self) -> None:
        start, horizon = self.slice.start, self.slice.horizon
        while not self._stop.is_set():
            with self._hold_lock:
                held = self._held_since is not None
                played = self.elapsed() - self._held_total
            if held:
                self._stop.wait(0.02)
                continue
            target = min(horizon, start + played * self.speed)
            # every action at or before target, then the clock at target: an action's
            # timestamps are its own second whatever the pace
            self.driver.run_until(target)
            if target >= horizon:
                break
            self._stop.wait(0.05)
        self.done.set()
