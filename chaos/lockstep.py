"""The closed-loop cluster of a run: jobs created suspended, admitted by ``dlc-ledger dispatch``.

kubesim plays the slice in closed-loop mode (:class:`kubesim.closed_loop.ClosedLoopDriver`)
and cluster time moves in lockstep with the dispatcher, a process of its own on the
cluster's clock (``dispatch --clock server``: kubesim's ``Date`` header), as
``replay --closed-loop`` moves it in one process:

1. hide the date (a dispatcher reading the clock waits), move kubesim to the instant;
2. wait until the pipeline has settled (``settle``: watched, published, stored, projected);
3. show the instant: the dispatcher cycles once at it, on the settled state, and acts;
   wait until it printed a cycle at that instant without failures (``cycled``);
4. the next instant: one cycle later when the cycle changed the cluster, else the next
   instant something happens by itself, on the cycle grid.

A dispatcher killed or failing holds cluster time instead of delaying admissions, so a
faulted run makes the same decisions at the same instants as a clean one. Ends when every
job has ended or nothing can change any more, or at ``horizon``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

from chaos.cluster import ClusterReplay, Slice
from kubesim.closed_loop import ClosedLoopDriver

__all__ = ["CYCLE_SECONDS", "LockstepReplay"]

#: cluster seconds between a cycle that acted and the next (``replay --cycle`` default)
CYCLE_SECONDS = 10.0


class LockstepReplay(ClusterReplay):
    """A :class:`~chaos.cluster.ClusterReplay` over a closed loop (module docstring).
    ``settle()`` returns once the pipeline holds everything kubesim wrote; ``cycled(at)``
    once the dispatcher has cycled at ``at`` without failures (both wait as long as it
    takes, raising when the run fails). ``wall_estimate``: the wall seconds the clean run's
    loop took, which faults are planned over."""

    thread_name = "chaos-lockstep"

    def __init__(
        self,
        chosen: Slice,
        settle: Callable[[], None],
        cycled: Callable[[float], None],
        *,
        wall_estimate: float,
        horizon: int,
    ) -> None:
        super().__init__(chosen)
        self.driver = ClosedLoopDriver(self.sim, chosen.trace)
        self.sim.hold_date(self.sim.clock.now())
        self.error: BaseException | None = None
        self.cycles = 0
        self.horizon = horizon
        self._settle, self._cycled = settle, cycled
        self._wall_estimate = wall_estimate
        self._holds = 0
        self._hold_lock = threading.Condition()

    @property
    def wall_seconds(self) -> float:
        return self._wall_estimate

    def hold(self) -> None:
        """Cluster time stands still (a 410 storm) until :meth:`release`."""
        with self._hold_lock:
            self._holds += 1

    def release(self) -> None:
        with self._hold_lock:
            self._holds = max(0, self._holds - 1)
            self._hold_lock.notify_all()

    def _unheld(self) -> None:
        with self._hold_lock:
            self._hold_lock.wait_for(lambda: self._holds == 0 or self._stop.is_set())

    def _play(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # the run reads it once done is set
            self.error = exc
        finally:
            self.sim.hold_date(self.sim.clock.now())
            self.done.set()

    def _loop(self) -> None:
        t = float(self.slice.start)
        while not self._stop.is_set():
            self._unheld()
            self.sim.hide_date()
            self.driver.run_until(t)
            self._settle()
            if self.driver.finished or t >= self.horizon:
                break
            revision = self.sim.store.resource_version
            self.sim.hold_date(self.sim.clock.now())
            self._cycled(t)
            self.cycles += 1
            due = self.driver.next_instant()
            if self.sim.store.resource_version != revision:
                t += CYCLE_SECONDS  # it acted: watch, project and confirm one cycle later
            elif due is None:
                break  # nothing will ever change: what is queued can never be admitted
            else:
                t = max(t + CYCLE_SECONDS, math.ceil(due / CYCLE_SECONDS) * CYCLE_SECONDS)
            t = min(t, float(self.horizon))

    def _wake(self) -> None:
        with self._hold_lock:
            self._hold_lock.notify_all()
