"""The start estimator, the blocking figures and the expected run times from plain data,
against hand-computed answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ledger.dispatch import Admitted, CycleInput, Incoming, Preemption, QuotaNode
from ledger.dispatch.estimates import (
    StartEstimate,
    ahead_of,
    estimate_starts,
    ever_fits,
    within_tree,
)
from ledger.dispatch.figures import KeyFigures, blocking_figures
from ledger.dispatch.queues import QueueSettings
from ledger.dispatch.runtimes import FinishedRun, RunTimeBook
from projections.dispatch.estimates import RunTimes, projected_ends

T = datetime(2026, 1, 1, 12, tzinfo=UTC)


def minutes(n: float) -> datetime:
    return T + timedelta(minutes=n)


def running(name: str, gpu: float, quota: str = "a", priority: int = 0) -> Admitted:
    return Admitted(name, quota, priority, {"gpu": gpu}, minutes(-60))


def waiting(name: str, gpu: float, queued: float, quota: str = "a", **kw: object) -> Incoming:
    priority = int(str(kw.get("priority", 0)))
    return Incoming(name, quota, priority, {"gpu": gpu}, minutes(queued), str(kw.get("ws", "")))


def tree(preemption: Preemption | None = None) -> tuple[QuotaNode, ...]:
    return (
        QuotaNode("root"),
        QuotaNode("a", "root", {"gpu": 4}, preemption=preemption or Preemption()),
    )


def test_jobs_ahead_end_then_the_queue_starts_in_order() -> None:
    cycle = CycleInput(
        tree(),
        (running("r1", 2), running("r2", 2)),
        (waiting("p1", 2, -5), waiting("p2", 2, -3), waiting("p3", 2, -1)),
        T,
    )
    ends = {"r1": minutes(10), "r2": minutes(30)}
    runs = {"p1": timedelta(minutes=20), "p2": timedelta(minutes=10), "p3": timedelta(minutes=5)}
    got = estimate_starts(cycle, ends, runs)
    # r1 ends at +10: p1 starts (until +30); at +30 r2 and p1 end: p2 and p3 start
    assert got == {
        "p1": StartEstimate("p1", minutes(10), "simulated", 2, 1),
        "p2": StartEstimate("p2", minutes(30), "simulated", 3, 3),
        "p3": StartEstimate("p3", minutes(30), "simulated", 3, 3),
    }
    # asking for one job simulates only as far as it needs
    assert estimate_starts(cycle, ends, runs, jobs=["p1"]) == {"p1": got["p1"]}


def test_a_job_that_fits_now_starts_now_and_an_overdue_job_ends_any_moment() -> None:
    cycle = CycleInput(tree(), (running("r1", 2), running("late", 2)), (waiting("p1", 2, -1),), T)
    assert estimate_starts(cycle, {"r1": minutes(5)}, {})["p1"].start == minutes(5)
    overdue = estimate_starts(cycle, {"late": minutes(-10), "r1": minutes(5)}, {})
    assert overdue["p1"] == StartEstimate("p1", T, "simulated", 2, 1)
    free = CycleInput(tree(), (running("r1", 2),), (waiting("p1", 2, -1),), T)
    assert estimate_starts(free, {}, {})["p1"] == StartEstimate("p1", T, "now", 1, 0)


def test_never_budget_and_horizon() -> None:
    cycle = CycleInput(
        tree(),
        (running("r1", 4),),
        (waiting("huge", 8, -9), waiting("broke", 1, -8, ws="ws-b"), waiting("p1", 2, -1)),
        T,
        blocked_workspaces=frozenset({"ws-b"}),
    )
    assert not ever_fits(cycle.quotas, cycle.pending[0]) and ever_fits(
        cycle.quotas, cycle.pending[2]
    )
    got = estimate_starts(cycle, {"r1": minutes(15)}, {})
    assert got["huge"] == StartEstimate("huge", None, "never", 0, 0)
    assert got["broke"].basis == "budget" and got["broke"].start is None
    assert got["p1"].start == minutes(15)
    assert estimate_starts(cycle, {"r1": minutes(15)}, {}, max_steps=1)["p1"] == StartEstimate(
        "p1", None, "horizon", 1, 1
    )
    # a running job with no projected end never frees its share
    assert estimate_starts(cycle, {}, {}, jobs=["p1"])["p1"].basis == "unknown"
    with pytest.raises(ValueError, match="max_steps"):
        estimate_starts(cycle, {}, {}, max_steps=0)


def test_a_preemptor_starts_once_its_victims_stop_and_they_requeue() -> None:
    quotas = tree(Preemption(within_quota="LowerPriority"))
    low = running("low", 4)
    cycle = CycleInput(quotas, (low,), (waiting("high", 4, -1, priority=5),), T)
    got = estimate_starts(cycle, {"low": minutes(60)}, {"high": timedelta(minutes=10)})
    assert got["high"] == StartEstimate("high", T, "simulated", 2, 0)
    # already preempting (victims being stopped): their capacity is its at once
    pending = CycleInput(
        quotas, (low,), (waiting("high", 4, -1, priority=5),), T, preempting=frozenset({"high"})
    )
    assert estimate_starts(pending, {"low": minutes(60)}, {})["high"].start == T
    # a job queued behind the preemptor waits for it; the victim is re-queued at T, after it
    behind = CycleInput(
        quotas, (low,), (waiting("high", 4, -1, priority=5), waiting("next", 4, -0.5)), T
    )
    got = estimate_starts(behind, {"low": minutes(60)}, {"high": timedelta(minutes=10)})
    assert got["next"].start == minutes(10)


def test_blocking_figures_are_the_cores_arithmetic() -> None:
    quotas = (
        QuotaNode("root", min={"gpu": 8}),
        QuotaNode("a", "root", {"gpu": 4}, {"gpu": 6}),
        QuotaNode("b", "root", {"gpu": 4}),
    )
    admitted = (running("a1", 4), running("b1", 3, quota="b"))
    rows = blocking_figures(quotas, admitted, waiting("j", 3, 0))
    # root: pool 0 + lent 4 + 4 = 8, uses 4 + 3 = 7 → 1 left; a: max 6 caps it at 2 beyond
    # its min, so it can get 1 now and 6 at most
    assert rows == (
        KeyFigures("a", "gpu", 3, 4, 6, 4, 1, 6),
        KeyFigures("root", "gpu", 3, 8, None, 7, 1, 8),
    )
    assert rows[0].short and not rows[0].never


def test_an_estimate_needs_only_the_jobs_tree() -> None:
    quotas = (*tree(), QuotaNode("other"), QuotaNode("o", "other", {"gpu": 4}))
    cycle = CycleInput(
        quotas,
        (running("r1", 4), running("x", 4, quota="o")),
        (waiting("p1", 2, -1), waiting("y", 2, -1, quota="o")),
        T,
    )
    narrow = within_tree(cycle, "a")
    assert [q.name for q in narrow.quotas] == ["root", "a"]
    assert [wl.job for wl in narrow.admitted] == ["r1"]
    assert [p.job for p in narrow.pending] == ["p1"]
    ends = {"r1": minutes(5), "x": minutes(50)}
    assert estimate_starts(narrow, ends, {}) == {"p1": estimate_starts(cycle, ends, {})["p1"]}


def test_only_the_jobs_ahead_and_those_starting_now_decide_a_start() -> None:
    # "first" fits now; "a" and "b" wait in that order; "c" (behind "b") would fit later
    cycle = CycleInput(
        tree(),
        (running("r1", 2),),
        (waiting("first", 1, -9), waiting("a", 2, -8), waiting("b", 2, -7), waiting("c", 1, -6)),
        T,
        queues={"a": QueueSettings("StrictFIFO")},
    )
    narrow = ahead_of(cycle, ["a"])
    assert [p.job for p in narrow.pending] == ["first", "a"]
    assert [p.job for p in ahead_of(cycle, ["a", "b"]).pending] == ["first", "a", "b"]
    # first starts now and ends at +5, leaving a the 2 GPUs it needs (r1 runs on)
    got = estimate_starts(narrow, {"r1": minutes(10)}, {"first": timedelta(minutes=5)})
    assert got["a"] == StartEstimate("a", minutes(5), "simulated", 2, 1)
    assert got["first"].basis == "now"


def test_an_idle_job_is_bounded_by_its_tree_not_its_quotas_max() -> None:
    quotas = (
        QuotaNode("root", min={"gpu": 8}),
        QuotaNode("a", "root", {"gpu": 2}, {"gpu": 2}),
        QuotaNode("b", "root", {"gpu": 6}),
    )
    idle = Incoming("idle", "a", 0, {"gpu": 6}, T, billing_mode="idle")
    public = Incoming("public", "a", 0, {"gpu": 6}, T)
    assert ever_fits(quotas, idle) and not ever_fits(quotas, public)
    leaf = blocking_figures(quotas, (), idle)[0]
    assert (leaf.capacity, leaf.short) == (8, False)
    assert blocking_figures(quotas, (), public)[0].capacity == 2


def test_a_running_job_is_expected_to_run_as_long_as_the_jobs_that_ran_longer() -> None:
    # one GPU each; with min_jobs=1 a class with any job that ran longer is enough
    runs = [FinishedRun("a", "ws", 1000, x) for x in (100.0, 200.0, 300.0, 1000.0)]
    runs += [FinishedRun("b", "ws", 1000, 5000.0), FinishedRun("b", None, 1000, 50.0)]
    book = RunTimeBook.of_runs(runs, min_jobs=1)
    own = book.of("a", "ws", 1000)
    assert own is not None and (own.median, own.scope, own.name, own.gpus, own.jobs) == (
        250.0,
        "quota",
        "a",
        1,
        4,
    )
    # 250 s in: only 300 s and 1000 s ran longer
    later = book.of("a", "ws", 1000, ran=250)
    assert later is not None and (later.median, later.jobs, later.ran) == (650.0, 2, 250)
    # past every job of its quota: its workspace's, then everyone's
    past = book.of("a", "ws", 1000, ran=1000)
    assert past is not None and (past.median, past.scope, past.name) == (5000.0, "workspace", "ws")
    other = book.of("c", None, 1000, ran=150)
    assert other is not None and (other.median, other.scope, other.jobs) == (650.0, "all", 4)
    # longer than any: a Pareto tail from its age, "as long again" at the median
    tail = book.of("a", "ws", 1000, ran=6000)
    assert tail is not None and tail.tail and tail.median == 12000.0
    assert tail.quantile(0.9) == pytest.approx(60000.0)
    times = RunTimes(book)
    running = (
        Admitted("r", "a", 0, {"gpu": 1000}, T - timedelta(seconds=250)),
        Admitted("old", "a", 0, {"gpu": 1000}, T - timedelta(seconds=6000)),
    )
    # r: 250 s in, 650 s expected; old: past every finished job, as long again
    assert projected_ends(running, times, T) == {
        "r": T + timedelta(seconds=400),
        "old": T + timedelta(seconds=6000),
    }
    assert projected_ends(running, RunTimes(), T) == {}
    # a declared maximum bounds them: old is past its 3000 s, it ends now at the latest
    capped = RunTimes(book, {"r": 300, "old": 3000})
    assert projected_ends(running, capped, T) == {
        "r": T + timedelta(seconds=50),
        "old": T - timedelta(seconds=3000),
    }
