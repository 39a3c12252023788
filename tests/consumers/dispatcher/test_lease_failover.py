"""Exactly one active dispatcher: two real ``dlc-ledger dispatch --follow`` processes on one
database; the second waits for the lease, and takes over within seconds when the first
is killed (SIGKILL: no clean-up of its own, the server drops its session and lock)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from tests.support.live import Live


class Dispatch:
    """A ``dlc-ledger dispatch --follow`` process whose output lines are collected."""

    def __init__(self, url: str, server: str) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dlc_ledger",
                "dispatch",
                "--follow",
                "--interval",
                "0.2",
                "--server",
                server,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "DATABASE_URL": url},
        )
        self.out: list[str] = []
        self.err: list[str] = []
        for stream, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=self._read, args=(stream, lines), daemon=True).start()

    @staticmethod
    def _read(stream: object, lines: list[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            lines.append(line.rstrip("\n"))

    def cycles(self) -> int:
        return sum(1 for line in self.out if line.startswith("cycle at "))

    def logged(self, text: str) -> bool:
        return any(text in line for line in self.err)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _until(condition: Callable[[], bool], timeout: float, what: str, *procs: Dispatch) -> float:
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            detail = "\n".join(line for p in procs for line in p.err[-15:])
            raise AssertionError(f"timed out waiting for {what}:\n{detail}")
        time.sleep(0.05)
    return time.monotonic() - start


def test_the_second_instance_waits_then_takes_over_when_the_first_is_killed(
    live: Live, database_url: str
) -> None:
    first = Dispatch(database_url, live.sim.url)
    second: Dispatch | None = None
    try:
        _until(lambda: first.cycles() >= 2, 60, "the first instance's cycles", first)
        second = Dispatch(database_url, live.sim.url)
        _until(lambda: second.logged("waiting for the dispatcher lease"), 60, "the wait", second)
        cycles = first.cycles()
        _until(lambda: first.cycles() > cycles + 2, 10, "the first still cycling", first)
        assert second.cycles() == 0  # it waits: nothing decided twice

        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
        took = _until(lambda: second.cycles() >= 1, 15, "the takeover", second)
        assert took < 10
        assert second.logged("took the dispatcher lease")

        # the new holder acts: a job queued now is admitted and resumed by it
        uid = live.submit("after", "ws-a", 1)
        live.project()
        _until(lambda: not live.suspended("after"), 15, "the resume", second)
        live.project()
        admits = [
            d
            for d in live.decisions()
            if d.data.get("job_uid") == uid and d.type == "AdmissionDecided"
        ]
        assert [d.data["outcome"] for d in admits] == ["admit"]
    finally:
        first.stop()
        if second is not None:
            second.stop()
    assert second is not None and second.proc.returncode == 0  # SIGTERM: a clean exit
