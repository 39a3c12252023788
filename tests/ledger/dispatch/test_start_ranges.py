"""Run-time distributions of comparable jobs and the start range drawn from them, from plain
data, against hand-computed answers (``ledger.dispatch.runtimes``,
``ledger.dispatch.estimates.estimate_ranges``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ledger.dispatch import Admitted, CycleInput, Incoming, QuotaNode
from ledger.dispatch.estimates import estimate_ranges, estimate_starts
from ledger.dispatch.runtimes import (
    LONGEST_RUN,
    FinishedRun,
    RunTime,
    RunTimeBook,
    gpu_class,
    percentile,
)
from ledger.errors import Invalid

T = datetime(2026, 1, 1, 12, tzinfo=UTC)


def seconds(n: float) -> datetime:
    return T + timedelta(seconds=n)


def test_gpu_classes_are_powers_of_two_of_whole_gpus() -> None:
    assert [gpu_class(m) for m in (0, 1, 470, 1000)] == [0, 1, 1, 1]
    assert [gpu_class(m) for m in (1001, 2000, 3000, 4000, 5000, 8000, 9000)] == [
        2,
        2,
        3,
        3,
        4,
        4,
        5,
    ]


def test_the_narrowest_class_with_enough_jobs_is_the_comparable_one() -> None:
    runs = [FinishedRun("a", "ws", 1000, s) for s in (10, 20, 30, 40, 50)]  # 1 GPU
    runs += [FinishedRun("a", "ws", 8000, s) for s in (1000, 2000)]  # 8 GPUs: only two
    runs += [FinishedRun("b", "wb", 8000, s) for s in (300, 400, 500)]
    book = RunTimeBook.of_runs(runs, min_jobs=5)
    one = book.of("a", "ws", 500)
    assert one is not None
    assert (one.scope, one.name, one.gpus, one.jobs, one.median) == ("quota", "a", 1, 5, 30)
    # 8 GPUs in a: two of its own (too few), seven in a, five 8-GPU jobs anywhere: the
    # quota's, the narrowest with enough
    eight = book.of("a", "ws", 8000)
    assert eight is not None and (eight.scope, eight.gpus, eight.jobs) == ("quota", None, 7)
    # c is unknown: 8-GPU jobs of any quota are five
    other = book.of("c", None, 8000)
    assert other is not None and (other.scope, other.gpus, other.jobs) == ("all", 4, 5)
    assert other.samples == (300, 400, 500, 1000, 2000)
    # too few anywhere: the class with the most
    sparse = RunTimeBook.of_runs(runs[:3], min_jobs=5).of("a", "ws", 1000)
    assert sparse is not None and (sparse.scope, sparse.jobs, sparse.tail) == ("quota", 3, False)
    assert RunTimeBook().of("a", "ws", 1000) is None  # nothing finished, no maximum


def test_a_running_job_too_few_outlasted_is_on_a_heavy_tail() -> None:
    runs = [FinishedRun("a", "ws", 1000, s) for s in (100, 200, 300, 400, 500, 600, 5000)]
    book = RunTimeBook.of_runs(runs, min_jobs=5)
    # 250 s in: five ran longer, enough: their run times alone
    young = book.of("a", "ws", 1000, ran=250)
    assert young is not None and young.samples == (300, 400, 500, 600, 5000)
    assert not young.tail and young.median == 500
    # 550 s in: two ran longer (600, 5000), too few to say how much longer: a Pareto tail
    # from its age (550 > 400, the median of all): P(run > x) = 550 / x, "as long again"
    old = book.of("a", "ws", 1000, ran=550)
    assert old is not None and old.samples == () and old.tail_from == 550
    assert (old.median, old.quantile(0.9)) == (pytest.approx(1100), pytest.approx(5500))
    # past every one: the same
    past = book.of("a", "ws", 1000, ran=6000)
    assert past is not None and past.tail and past.median == pytest.approx(12000)
    assert past.quantile(0.999999) == LONGEST_RUN  # never past ten years
    # a young job few finished jobs outlasted: the tail from a typical run (the median of
    # all, 700 s), not from its 5 s
    few = RunTimeBook.of_runs([FinishedRun("a", "ws", 1000, s) for s in (600, 700, 800)])
    new = few.of("a", "ws", 1000, ran=5)
    assert new is not None and new.tail_from == 700 and new.median == pytest.approx(1400)


def test_a_declared_maximum_bounds_every_run_time() -> None:
    runs = [FinishedRun("a", "ws", 1000, s) for s in (100, 200, 300, 400, 5000)]
    book = RunTimeBook.of_runs(runs, min_jobs=5)
    capped = book.of("a", "ws", 1000, cap=350)
    assert capped is not None and capped.median == 300
    assert capped.quantile(0.9) == 350 and capped.draw(0.99) == 350
    # nothing known but its maximum: it runs to it
    alone = RunTimeBook().of("a", "ws", 1000, cap=3600)
    assert alone is not None and (alone.median, alone.draw(0.1), alone.scope) == (3600, 3600, None)
    with pytest.raises(Invalid):
        RunTime(())
    with pytest.raises(Invalid):
        RunTime((1.0,), tail_from=2.0)


def test_draws_spread_over_the_distribution() -> None:
    runtime = RunTime((10.0, 20.0, 30.0, 40.0))
    assert [runtime.draw(u) for u in (0, 0.24, 0.25, 0.5, 0.99)] == [10, 10, 20, 30, 40]
    tail = RunTime((), tail_from=200.0)
    assert tail.draw(0) == 200 and tail.draw(0.5) == 400 and tail.draw(0.75) == 800
    assert percentile((1.0, 2.0, 3.0), 0.25) == 1.5
    with pytest.raises(Invalid):
        runtime.draw(1.0)


def _tree() -> tuple[QuotaNode, ...]:
    return (QuotaNode("root"), QuotaNode("a", "root", {"gpu": 4}))


def test_the_range_is_the_spread_of_starts_over_drawn_futures() -> None:
    # w waits for the one running job r; r runs 600 s or 1200 s, equally likely: in half the
    # futures w starts at +600, in the other half at +1200
    cycle = CycleInput(
        _tree(),
        (Admitted("r", "a", 0, {"gpu": 4}, T),),
        (Incoming("w", "a", 0, {"gpu": 4}, T),),
        T,
    )
    runs = {"r": RunTime((600.0, 1200.0))}
    got = estimate_ranges(cycle, runs, {}, samples=16)["w"]
    assert (got.low, got.high) == (seconds(600), seconds(1200))
    assert (got.samples, got.started) == (16, 16)
    # the 10th to the 40th percentile: all in the early half; the median between the halves
    early = estimate_ranges(cycle, runs, {}, samples=16, quantiles=(0.1, 0.4))["w"]
    assert (early.low, early.high) == (seconds(600), seconds(600))
    middle = estimate_ranges(cycle, runs, {}, samples=16, quantiles=(0.5, 0.5))["w"]
    assert middle.low == middle.high == seconds(900)
    # the same input, the same range (seeded draws)
    assert estimate_ranges(cycle, runs, {}, samples=16) == estimate_ranges(
        cycle, runs, {}, samples=16
    )
    # a job ahead of w runs its own drawn time after r: w starts after both
    queued = CycleInput(
        _tree(),
        cycle.admitted,
        (Incoming("v", "a", 0, {"gpu": 4}, T - timedelta(seconds=1)), *cycle.pending),
        T,
    )
    both = estimate_ranges(queued, runs, {"v": RunTime((100.0,))}, samples=16)
    assert (both["w"].low, both["w"].high) == (seconds(700), seconds(1300))
    assert (both["v"].low, both["v"].high) == (seconds(600), seconds(1200))


def test_jobs_running_at_once_run_long_or_short_together() -> None:
    # w needs one GPU of four held by r1..r4, each running 60 s or 6000 s, equally likely.
    # Drawn independently, some r ends at +60 in all but 1/16 of the futures (the range
    # would end at +60); drawn together (one stratum per future), half of the futures are
    # the long ones: the range spans both, as the point estimate's median future does
    held = tuple(Admitted(f"r{k}", "a", 0, {"gpu": 1}, T) for k in range(1, 5))
    cycle = CycleInput(_tree(), held, (Incoming("w", "a", 0, {"gpu": 1}, T),), T)
    runs = {wl.job: RunTime((60.0, 6000.0)) for wl in held}
    got = estimate_ranges(cycle, runs, {}, samples=16)["w"]
    assert (got.low, got.high) == (seconds(60), seconds(6000))


def test_futures_where_it_never_starts_leave_the_range_open() -> None:
    # r ends in one future of two (its run time: 600 s, or a maximum far away: LONGEST_RUN
    # with nothing drawn past it); w needs it gone
    cycle = CycleInput(
        _tree(),
        (Admitted("r", "a", 0, {"gpu": 4}, T), Admitted("s", "a", 0, {"gpu": 0}, T)),
        (Incoming("w", "a", 0, {"gpu": 4}, T),),
        T,
    )
    # s has no run time: it never ends, but takes nothing; r has none either: never starts
    nothing = estimate_ranges(cycle, {}, {}, samples=4)["w"]
    assert (nothing.low, nothing.high, nothing.started) == (None, None, 0)
    one_step = estimate_ranges(cycle, {"r": RunTime((600.0,))}, {}, samples=4, max_steps=1)
    assert one_step["w"].low is None  # still pending after one simulated instant
    with pytest.raises(Invalid):
        estimate_ranges(cycle, {}, {}, quantiles=(0.9, 0.1))
    with pytest.raises(Invalid):
        estimate_ranges(cycle, {}, {}, samples=0)


def test_the_point_estimate_is_the_simulation_at_every_median() -> None:
    cycle = CycleInput(
        _tree(),
        (Admitted("r", "a", 0, {"gpu": 4}, T),),
        (Incoming("w", "a", 0, {"gpu": 4}, T),),
        T,
    )
    runtime = RunTime((600.0, 1200.0, 1800.0))
    point = estimate_starts(cycle, {"r": T + timedelta(seconds=runtime.median)}, {})["w"]
    span = estimate_ranges(cycle, {"r": runtime}, {}, samples=30)["w"]
    assert span.low is not None and span.high is not None
    assert point.start == seconds(1200) and span.low <= point.start <= span.high
