"""The faults: what is broken, when, and whether the pipeline came back.

A plan is drawn from ``random.Random(seed)`` before the run starts, so a seed names the same
faults at the same moments of the replay (in wall seconds after it starts) with the same
targets. Every kind is drawn before any is drawn twice. Each fault is printed when it is
injected and again when the pipeline has recovered from it: its part is back (a killed
process restarted, the watches reconnected, the broker reachable) and the store has grown
since (or the cluster has changed nothing since, or the replay has nothing more to store).
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from chaos.processes import Process, Supervisor

__all__ = [
    "COMPONENTS",
    "HOLD_TIMEOUT",
    "KINDS",
    "RECOVERY_TIMEOUT",
    "Fault",
    "Injector",
    "KubeKnobs",
    "Target",
    "plan_faults",
]

#: the components a fault may hit (the names the supervisor knows them by)
COMPONENTS = ("watch", "ingest-a", "ingest-b", "project", "billing", "notifications", "api")

KINDS = (
    "kill",  # SIGKILL of a component; the supervisor restarts it
    "pg-terminate",  # pg_terminate_backend of one component's sessions, or of all
    "pg-restart",  # pg_ctl restart -m fast | immediate
    "broker-cut",  # every Kafka connection reset and new ones refused for a while
    "kube-expired",  # history expired and watches cut: every watcher gets 410, relists
    "kube-stall",  # watches stop sending for a while, then resume
    "kube-cut",  # watch lines split in small chunks, connections dropped mid-line
    "kube-errors",  # a burst of 429 (Retry-After) or 5xx answers
    "rebalance",  # an ingest consumer killed, or a third one joining for a while
)

RECOVERY_TIMEOUT = 180.0  # a watcher backs off up to 30 s a retry, and bursts stack
#: how long a 410 storm holds cluster time for the watchers to watch again (they may be
#: backing off from an error burst: up to 30 s a retry)
HOLD_TIMEOUT = 180.0


@dataclass
class Fault:
    index: int
    at: float  # wall seconds after the replay started
    kind: str
    target: str = ""  # a component, "all", a status code, a shutdown mode...
    seconds: float = 0.0  # how long a cut / stall / extra consumer lasts
    injected_at: float | None = None
    detail: str = ""
    ended_at: float | None = None
    recovered_after: float | None = None  # seconds from injection
    head_at_injection: int = 0
    revision_at_injection: int = 0
    starts_at_injection: int = 0
    failed: str = ""

    def describe(self) -> str:
        what = f"{self.kind} {self.target}".strip()
        return what + (f" for {self.seconds:.1f} s" if self.seconds else "")


def plan_faults(
    rng: random.Random,
    count: int,
    wall_seconds: float,
    components: tuple[str, ...] = COMPONENTS,
    *,
    first_kill: str | None = None,
) -> list[Fault]:
    """``count`` faults at seeded moments spread over the replay's ``wall_seconds``, kills
    and terminations among ``components`` (the first kill of ``first_kill`` if given)."""
    kinds: list[str] = []
    while len(kinds) < count:
        batch = list(KINDS)
        rng.shuffle(batch)
        kinds += batch
    moments = sorted(rng.uniform(0.03, 0.9) * wall_seconds for _ in range(count))
    faults: list[Fault] = []
    for index, (at, kind) in enumerate(zip(moments, kinds[:count], strict=True), 1):
        fault = Fault(index, round(at, 2), kind)
        if kind == "kill":
            fault.target = rng.choice(components)
            if first_kill is not None and not any(f.kind == "kill" for f in faults):
                fault.target = first_kill
        elif kind == "pg-terminate":
            fault.target = rng.choice((*components, "all"))
        elif kind == "pg-restart":
            fault.target = rng.choice(("fast", "immediate"))
        elif kind == "broker-cut":
            fault.seconds = round(rng.uniform(1.0, 6.0), 1)
        elif kind == "kube-stall":
            fault.seconds = round(rng.uniform(1.0, 5.0), 1)
        elif kind == "kube-cut":
            fault.target = str(rng.choice((7, 64, 512)))  # chunk bytes
        elif kind == "kube-errors":
            fault.target = str(rng.choice((429, 500, 503)))
            fault.seconds = 0.0
        elif kind == "rebalance":
            fault.target = rng.choice(("kill ingest-a", "kill ingest-b", "join ingest-c"))
            fault.seconds = round(rng.uniform(3.0, 10.0), 1) if "join" in fault.target else 0.0
        faults.append(fault)
    return faults


class Target(Protocol):
    """What the injector breaks: one run's parts."""

    supervisor: Supervisor

    def store_head(self) -> int: ...
    def database_up(self) -> bool: ...
    def pg_restart(self, mode: str) -> None: ...
    def pg_terminate(self, application_like: str) -> int: ...
    def broker_cut(self) -> int: ...
    def broker_restore(self) -> None: ...
    def broker_reconnected_since(self, mark: int) -> bool: ...
    def broker_accepted(self) -> int: ...
    def kube(self) -> KubeKnobs: ...
    def watches_open(self) -> int: ...
    def component(self, name: str) -> Process: ...
    def replay_done(self) -> bool: ...
    def cluster_revision(self) -> int: ...
    def hold_cluster(self) -> tuple[list[object], int]: ...
    def release_cluster(self) -> None: ...
    def watch_backlog(self) -> int: ...
    def watches(self) -> list[object]: ...
    def lists_since(self, mark: int) -> int: ...


class KubeKnobs(Protocol):
    def compact(self) -> int: ...
    def cut_watches(self) -> int: ...
    def stall_watches(self) -> int: ...
    def resume_watches(self) -> None: ...
    def split_events(self, chunk_size: int | None) -> None: ...
    def fail_next_requests(
        self, count: int, status: int = 429, retry_after: int | None = 1
    ) -> None: ...


@dataclass
class Injector:
    """Injects a plan's faults at their moments and follows each until it recovered."""

    target: Target
    faults: list[Fault]
    say: Callable[[str], None]
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _pg_lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)
    _clock0: float = 0.0

    def run(self, started_at: float, stop: threading.Event) -> None:
        """Inject every fault at its moment after ``started_at`` (monotonic seconds)."""
        self._clock0 = started_at
        for fault in self.faults:
            wait = started_at + fault.at - time.monotonic()
            if wait > 0 and stop.wait(wait):
                return
            thread = threading.Thread(
                target=self._inject_and_follow,
                args=(fault,),
                name=f"fault-{fault.index}",
                daemon=True,  # a failed run does not wait for its faults to recover
            )
            thread.start()
            self._threads.append(thread)

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _now(self) -> float:
        return time.monotonic() - self._clock0

    def _inject_and_follow(self, fault: Fault) -> None:
        fault.head_at_injection = self.target.store_head()
        fault.revision_at_injection = self.target.cluster_revision()
        fault.injected_at = self._now()
        try:
            check = self._inject(fault)
        except Exception as exc:  # a fault that could not be injected is reported, not hidden
            fault.failed = f"not injected: {type(exc).__name__}: {exc}"
            self.say(f"[{fault.injected_at:6.1f}s] fault {fault.index}: {fault.describe()}: "
                     f"{fault.failed}")  # fmt: skip
            return
        fault.ended_at = self._now()
        self.say(f"[{fault.injected_at:6.1f}s] fault {fault.index}/{len(self.faults)}: "
                 f"{fault.describe()}: {fault.detail}")  # fmt: skip
        deadline = time.monotonic() + RECOVERY_TIMEOUT
        while time.monotonic() < deadline:
            part_back = check()
            grew = self.target.store_head() > fault.head_at_injection
            # nothing happened on the cluster since (held by a 410 storm): nothing to store
            still = self.target.cluster_revision() == fault.revision_at_injection
            if part_back and (grew or still or self.target.replay_done()):
                fault.recovered_after = round(self._now() - fault.injected_at, 2)
                head = self.target.store_head()
                self.say(
                    f"[{self._now():6.1f}s]   fault {fault.index} recovered after "
                    f"{fault.recovered_after:.1f} s (store at {head})"
                )
                return
            time.sleep(0.2)
        fault.failed = f"no recovery within {RECOVERY_TIMEOUT:.0f} s"
        self.say(f"[{self._now():6.1f}s]   fault {fault.index}: {fault.failed}")

    # -- the kinds -------------------------------------------------------------------------

    def _inject(self, fault: Fault) -> Callable[[], bool]:
        """Break it; returns the check that its part is back."""
        t = self.target
        if fault.kind == "kill":
            return self._kill(fault, fault.target)
        if fault.kind == "rebalance":
            if fault.target.startswith("kill "):
                return self._kill(fault, fault.target.split()[1])
            return self._third_consumer(fault)
        if fault.kind == "pg-terminate":
            pattern = "chaos-%" if fault.target == "all" else f"chaos-{fault.target}"
            with self._pg_lock:
                ended = t.pg_terminate(pattern)
            fault.detail = f"{ended} sessions terminated"
            return t.database_up
        if fault.kind == "pg-restart":
            started = time.monotonic()
            with self._pg_lock:
                t.pg_restart(fault.target)
            fault.detail = f"restarted in {time.monotonic() - started:.1f} s"
            return t.database_up
        if fault.kind == "broker-cut":
            reset = t.broker_cut()
            fault.detail = f"{reset} connections reset"
            time.sleep(fault.seconds)
            mark = t.broker_accepted()
            t.broker_restore()
            return lambda: t.broker_reconnected_since(mark)
        kube = t.kube()
        if fault.kind == "kube-expired":
            return self._expire(fault, kube)
        if fault.kind == "kube-stall":
            fault.detail = f"{kube.stall_watches()} watches stalled"
            time.sleep(fault.seconds)
            kube.resume_watches()
        elif fault.kind == "kube-cut":
            kube.split_events(int(fault.target))
            fault.detail = f"{kube.cut_watches()} watches dropped mid-line"
            time.sleep(1.0)
            kube.split_events(None)
        elif fault.kind == "kube-errors":
            status = int(fault.target)
            # a burst, not an outage: the requests that meet it are the watchers' retries,
            # spaced by their back-off, so a longer one lasts minutes
            kube.fail_next_requests(6, status=status)
            kube.cut_watches()  # the watchers' reconnections meet the burst
            fault.detail = f"the next 6 requests answered {status}"
        else:  # pragma: no cover - plan_faults draws from KINDS
            raise ValueError(fault.kind)
        return lambda: t.watches_open() >= _watches_expected()

    def _expire(self, fault: Fault, kube: KubeKnobs) -> Callable[[], bool]:
        """A 410 storm on watchers that are up to date, as an API server restart gives
        them: cluster time held, every watcher connected and sent all it had queued, then
        the history forgotten and every watch cut; the watchers resume, get 410 (all but
        the one whose revision is the newest) and list again, and only once every one
        watches again does cluster time go on. A watcher that was disconnected while the
        cluster changed would relist into a state that no longer shows what happened in
        between: that is list/watch's own limit, not a fault the pipeline can survive
        (docs/chaos.md, "What a 410 costs")."""
        t = self.target
        started = time.monotonic()
        _, mark = t.hold_cluster()
        try:
            while t.watches_open() < _watches_expected() or t.watch_backlog():
                if time.monotonic() - started > HOLD_TIMEOUT:
                    raise TimeoutError("the watchers did not catch up")
                time.sleep(0.05)
            old = t.watches()  # kept referenced: no new watch can reuse an old one's id
            before = {id(sub) for sub in old}
            revision = kube.compact()
            cut = kube.cut_watches()
            while sum(id(s) not in before for s in t.watches()) < _watches_expected():
                if time.monotonic() - started > HOLD_TIMEOUT:
                    raise TimeoutError("the watchers did not watch again")
                time.sleep(0.05)
            fault.detail = (
                f"history forgotten at rv {revision}, {cut} watches cut, "
                f"{t.lists_since(mark)} lists, all watching again; cluster time held "
                f"{time.monotonic() - started:.1f} s"
            )
        finally:
            t.release_cluster()
        return lambda: t.watches_open() >= _watches_expected()

    def _kill(self, fault: Fault, name: str) -> Callable[[], bool]:
        process = self.target.component(name)
        starts = process.starts
        pid = self.target.supervisor.kill(name, signal.SIGKILL)
        fault.detail = f"pid {pid} killed" if pid else "was not running (restarting already)"
        return lambda: process.starts > starts and process.alive()

    def _third_consumer(self, fault: Fault) -> Callable[[], bool]:
        supervisor = self.target.supervisor
        model = self.target.component("ingest-a")
        env = {**model.env, "DATABASE_URL": model.env["DATABASE_URL"].replace(
            "chaos-ingest-a", "chaos-ingest-c")}  # fmt: skip
        log = supervisor.log_dir / "ingest-c.log"
        mark = log.stat().st_size if log.exists() else 0
        supervisor.add(Process("ingest-c", list(model.args), env))
        # it leaves once it has joined (has partitions): Tansu 0.6 keeps a member that
        # leaves while its JoinGroup is pending as a ghost whose SyncGroup never comes, and
        # the group stays in a rebalance no one completes (Kafka expires it after the
        # session timeout; docs/kafka.md). That is the broker's bug, not the pipeline's.
        deadline = time.monotonic() + _JOIN_TIMEOUT
        while time.monotonic() < deadline and not _assigned_since(log, mark):
            time.sleep(0.2)
        fault.detail = "a third consumer joined the group" + (
            "" if _assigned_since(log, mark) else f" (no partitions within {_JOIN_TIMEOUT:.0f} s)"
        )
        time.sleep(fault.seconds)
        supervisor.remove("ingest-c")
        fault.detail += ", then left it"
        return lambda: True


_JOIN_TIMEOUT = 30.0


def _assigned_since(log: Path, mark: int) -> bool:
    """Whether the consumer logging to ``log`` was given partitions after byte ``mark``."""
    if not log.exists():
        return False
    with log.open("rb") as f:
        f.seek(mark)
        return b"Setting newly assigned partitions" in f.read()


def _watches_expected() -> int:
    from chaos.cluster import WATCHES

    return WATCHES
