"""The supervisor ``up`` runs its parts under: a part that fails stops them all, naming it."""

from __future__ import annotations

import threading
import time

import pytest

from dlc_ledger.wiring.supervisor import Component, ComponentFailed, Supervisor


def _serving(log: list[str], name: str) -> Component:
    def run(stop: threading.Event, ready: threading.Event) -> None:
        ready.set()
        stop.wait()
        log.append(f"{name} stopped")

    return Component(name, run)


def test_a_part_that_raises_stops_the_others_and_is_named() -> None:
    log: list[str] = []
    supervisor = Supervisor()
    supervisor.start(_serving(log, "projector"))
    crash = threading.Event()

    def run(stop: threading.Event, ready: threading.Event) -> None:
        ready.set()
        crash.wait()
        raise ConnectionError("server closed the connection unexpectedly")

    supervisor.start(Component("billing", run))
    crash.set()
    with pytest.raises(ComponentFailed) as failed:
        supervisor.wait()
    assert str(failed.value) == (
        "billing failed: ConnectionError: server closed the connection unexpectedly"
    )
    assert failed.value.component == "billing"
    assert supervisor.shutdown() == []
    assert log == ["projector stopped"]


def test_a_part_that_returns_by_itself_is_a_failure_unless_it_may_finish() -> None:
    supervisor = Supervisor()
    supervisor.start(Component("trace", lambda _stop, ready: ready.set(), may_finish=True))
    time.sleep(0.2)
    assert supervisor.failure is None and not supervisor.stop.is_set()
    supervisor.start(Component("ingest", lambda _stop, ready: ready.set()))
    with pytest.raises(ComponentFailed, match="ingest failed: stopped unexpectedly"):
        supervisor.wait()
    supervisor.shutdown()


def test_a_part_failing_before_it_is_ready_fails_start() -> None:
    supervisor = Supervisor()

    def run(_stop: threading.Event, _ready: threading.Event) -> None:
        raise SystemExit(1)  # what uvicorn does when its app cannot load

    with pytest.raises(ComponentFailed, match="api failed: SystemExit: 1"):
        supervisor.start(Component("api", run))
    supervisor.shutdown()


def test_stop_ends_every_part_and_calls_their_halts_newest_first() -> None:
    log: list[str] = []
    supervisor = Supervisor()
    supervisor.start(_serving(log, "first"))
    flag = threading.Event()

    def run(_stop: threading.Event, ready: threading.Event) -> None:
        ready.set()
        flag.wait()  # watches a flag of its own, like uvicorn's should_exit
        log.append("api stopped")

    def halt() -> None:
        log.append("api halted")
        flag.set()

    supervisor.start(Component("api", run, halt=halt))
    supervisor.stop.set()  # what SIGINT / SIGTERM do
    supervisor.wait()  # no failure: returns
    assert supervisor.shutdown() == []
    assert log[0] == "api halted" and set(log[1:]) == {"api stopped", "first stopped"}


def test_a_signal_during_start_up_interrupts_it() -> None:
    supervisor = Supervisor()
    supervisor.stop.set()
    with pytest.raises(KeyboardInterrupt):
        supervisor.start(Component("slow", lambda stop, _ready: stop.wait()))
    assert supervisor.shutdown() == []


def test_a_part_never_ready_times_out() -> None:
    supervisor = Supervisor()
    with pytest.raises(ComponentFailed, match="watcher failed: TimeoutError: not ready within"):
        supervisor.start(Component("watcher", lambda stop, _ready: stop.wait()), ready_timeout=0.3)
    assert supervisor.shutdown() == []
