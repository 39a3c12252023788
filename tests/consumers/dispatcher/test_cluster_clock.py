"""The dispatcher on the cluster's clock (``dispatch --clock server``): kubesim's ``Date``
header is its virtual clock, the runner cycles once per instant shown (again only after a
failed cycle), and a transiently failing API server defers the cycle's other calls in
their order."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from consumers.dispatcher import CycleOutcome, run_dispatcher
from consumers.dispatcher.clocks import api_server_clock
from tests.support.live import Live


def test_the_api_servers_date_is_the_virtual_clock_or_the_instant_held(live: Live) -> None:
    now = api_server_clock(live.api)
    live.sim.advance_to(3600.0)
    assert now() == live.sim.clock.now()
    held = live.sim.clock.now() - timedelta(minutes=5)
    live.sim.hold_date(held)
    live.sim.advance_to(7200.0)
    assert now() == held
    live.sim.fail_next_requests(1, status=503)
    assert now() == held  # an error answer tells the time as well
    # hidden while the cluster moves: a reading waits for the instant shown next
    live.sim.hide_date()
    read: list[datetime] = []
    reader = threading.Thread(target=lambda: read.append(now()))
    reader.start()
    reader.join(0.3)
    assert reader.is_alive() and not read
    live.sim.hold_date(live.sim.clock.now())
    reader.join(5)
    assert read == [live.sim.clock.now()]
    live.sim.hold_date(None)
    assert now() == live.sim.clock.now()


def _until(condition: object, stop: threading.Event, seconds: float = 20.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if condition():  # type: ignore[operator]
            return
        stop.wait(0.05)
    raise AssertionError("not reached in time")


def test_one_cycle_per_instant_shown_and_again_after_a_failure(live: Live) -> None:
    dispatcher = live.new_dispatcher(clock=api_server_clock(live.api))
    live.sim.advance_to(60.0)
    live.sim.hold_date(live.sim.clock.now())
    seen: list[CycleOutcome] = []
    stop = threading.Event()
    runner = threading.Thread(
        target=run_dispatcher,
        args=(dispatcher, live.store),
        kwargs={
            "follow": True, "interval": 0.05, "stop": stop, "on_cycle": seen.append,
            "once_per_instant": True,
        },
    )  # fmt: skip
    runner.start()
    try:
        _until(lambda: len(seen) == 1, stop)
        stop.wait(0.5)
        assert len(seen) == 1  # the instant has not moved: no second cycle
        assert seen[0].at == live.sim.clock.now()

        live.submit("a1", "ws-a", 1)
        live.submit("a2", "ws-a", 1)
        live.sim.advance_to(120.0)
        # the next PATCH fails: the first resume fails and the second waits, in its order
        live.sim.fail_next_requests(1, status=500, methods=frozenset({"PATCH"}))
        mark = len(live.sim.requests)
        live.sim.hold_date(live.sim.clock.now())
        _until(lambda: any(o.admitted for o in seen), stop)
        failed = next(o for o in seen if o.admitted)
        assert failed.resumed == ()
        calls = [f.split(":")[0] for f in failed.failures]
        assert calls == ["resume " + uid for uid in sorted(failed.admitted)]
        assert "deferred" in failed.failures[1]
        # the same instant, cycled again because the last cycle failed; then no more
        _until(lambda: seen[-1].resumed, stop)
        assert seen[-1].at == failed.at and sorted(seen[-1].resumed) == sorted(failed.admitted)
        count = len(seen)
        stop.wait(0.5)
        assert len(seen) == count
        patches = [r for r in live.sim.requests[mark:] if r.method == "PATCH"]
        assert [r.status for r in patches] == [500, 200, 200]
        assert patches[1].path == patches[0].path  # the failed call comes first again
    finally:
        stop.set()
        runner.join(10)
    assert not runner.is_alive()
