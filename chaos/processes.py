"""Each component as its production command in a process of its own, restarted when it dies.

A small stand-in for a Kubernetes restart policy (``Always``): a process that exits, for
whatever reason, is started again after a short back-off that doubles while it keeps dying
(0.5 s up to 4 s) and resets once it has stayed up. Faults kill processes by pid (SIGKILL);
the supervisor sees the death on its next look (every 0.1 s).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Process", "Supervisor"]

_FIRST_BACKOFF = 0.5
_MAX_BACKOFF = 4.0
_STABLE = 10.0  # seconds up after which the back-off starts again from the first


@dataclass
class Process:
    """One component: its command line (after ``dlc-ledger``) and environment."""

    name: str
    args: list[str]
    env: dict[str, str]
    restart: bool = True
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    starts: int = 0
    exits: list[int] = field(default_factory=list)
    uptimes: list[float] = field(default_factory=list)  # seconds each earlier start lasted
    backoff: float = _FIRST_BACKOFF
    due: float | None = None  # when a dead one is started again

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Supervisor:
    """Starts, watches and restarts :class:`Process` es; logs go to ``log_dir/<name>.log``."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.processes: dict[str, Process] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="chaos-supervisor", daemon=True)

    def start(self) -> Supervisor:
        self._thread.start()
        return self

    def add(self, process: Process) -> Process:
        with self._lock:
            self.processes[process.name] = process
            self._spawn(process)
        return process

    def kill(self, name: str, sig: int = signal.SIGKILL) -> int | None:
        """Signal one component's process (it is restarted, unless it is being removed);
        its pid."""
        with self._lock:
            process = self.processes[name]
            if not process.alive() or process.proc is None:
                return None
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.proc.pid, sig)
            return process.proc.pid

    def remove(self, name: str, timeout: float = 15.0) -> None:
        """Stop one component for good (SIGTERM, SIGKILL after ``timeout``)."""
        with self._lock:
            process = self.processes.pop(name, None)
        if process is not None:
            process.restart = False
            self._end(process, timeout)

    def stop_all(self, timeout: float = 20.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        with self._lock:
            processes = list(self.processes.values())
        for process in processes:
            process.restart = False
            if process.alive() and process.proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    process.proc.send_signal(signal.SIGTERM)
        for process in processes:
            self._end(process, timeout)

    def all_up(self, for_seconds: float = 0.0) -> bool:
        """Every component alive (and, with ``for_seconds``, up at least that long)."""
        now = time.monotonic()
        with self._lock:
            return all(
                p.alive() and now - p.started_at >= for_seconds for p in self.processes.values()
            )

    def crash_looping(self, name: str) -> bool:
        """Dead, and its last five starts each lasted under 3 s: it cannot start at all."""
        process = self.processes[name]
        last = process.uptimes[-5:]
        return not process.alive() and len(last) == 5 and all(u < 3.0 for u in last)

    def restarts(self) -> dict[str, int]:
        with self._lock:
            return {name: p.starts - 1 for name, p in self.processes.items()}

    # -- internals -------------------------------------------------------------------------

    def _spawn(self, process: Process) -> None:
        log = (self.log_dir / f"{process.name}.log").open("ab")
        try:
            log.write(f"--- start {process.starts + 1} at {time.time():.3f}\n".encode())
            log.flush()
            process.proc = subprocess.Popen(
                [sys.executable, "-m", "dlc_ledger", *process.args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=process.env,
                start_new_session=True,  # a Ctrl-C of the driver reaches the driver only
            )
        finally:
            log.close()
        process.started_at = time.monotonic()
        process.starts += 1
        process.due = None

    def _end(self, process: Process, timeout: float) -> None:
        proc = process.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def _watch(self) -> None:
        while not self._stop.wait(0.1):
            now = time.monotonic()
            with self._lock:
                for process in self.processes.values():
                    if process.proc is None or process.proc.poll() is None or not process.restart:
                        continue
                    if process.due is None:
                        process.exits.append(process.proc.returncode)
                        process.uptimes.append(now - process.started_at)
                        if now - process.started_at >= _STABLE:
                            process.backoff = _FIRST_BACKOFF
                        process.due = now + process.backoff
                        process.backoff = min(_MAX_BACKOFF, process.backoff * 2)
                    elif now >= process.due and not self._stop.is_set():
                        self._spawn(process)
