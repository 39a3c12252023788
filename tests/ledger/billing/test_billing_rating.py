"""Rating: exact splits at price changes and period boundaries, modes, rounding once, accrual."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.events import OccupancyEnded, OccupancyStarted
from ledger.prices import NoApplicableRate, PriceSchedule
from ledger.rating import (
    LineKey,
    Occupancy,
    Posted,
    accrue,
    calendar_months,
    rate_interval,
    rate_occupancy,
    rate_to_date,
    totals_after,
)

from .helpers import A100, SCHEDULE, T0, at, book, demo, micros, occupancies, occupancy, spot


def test_interval_across_a_price_change_splits_exactly() -> None:
    s = PriceSchedule(
        [
            book("a", "2026-01-01T00:00", {"gpu/any": "2.40", "cpu": "0.048", "memory": "0.006"}),
            book("b", "2026-01-15T12:00", {"gpu/any": "3.00", "cpu": "0.050", "memory": "0.010"}),
        ]
    )
    occ = occupancy("2026-01-15T10:00", "2026-01-15T13:30", mgpu=2000, cpu_milli=8000,
                    memory_mib=32768)  # fmt: skip
    r = rate_occupancy(occ, s)
    gpu = r.line("2026-01", "gpu/any")
    assert [(seg.start, seg.end, seg.rate.book_id) for seg in gpu.segments] == [
        (at("2026-01-15T10:00"), at("2026-01-15T12:00"), "a"),
        (at("2026-01-15T12:00"), at("2026-01-15T13:30"), "b"),
    ]
    # 2 GPU x 2 h x 2.40 + 2 GPU x 1.5 h x 3.00 = 9.60 + 9.00
    assert [seg.amount for seg in gpu.segments] == [Decimal("9.6"), Decimal("9")]
    assert (gpu.quantity, gpu.amount, gpu.amount_minor) == (Decimal(7), Decimal("18.6"), 1860)
    cpu = r.line("2026-01", "cpu")  # 8 x 2 x 0.048 + 8 x 1.5 x 0.05 = 0.768 + 0.6
    assert (cpu.quantity, cpu.amount, cpu.amount_minor) == (Decimal(28), Decimal("1.368"), 137)
    mem = r.line("2026-01", "memory")  # 32 x 2 x 0.006 + 32 x 1.5 x 0.01 = 0.384 + 0.48
    assert (mem.quantity, mem.amount, mem.amount_minor) == (Decimal(112), Decimal("0.864"), 86)
    assert r.total_minor == 1860 + 137 + 86


def test_interval_across_a_month_boundary_splits_into_two_periods() -> None:
    r = rate_occupancy(occupancy("2026-01-31T22:30", "2026-02-01T01:00"), demo())
    assert [(li.period, li.quantity, li.amount_minor) for li in r.lines] == [
        ("2026-01", Decimal("1.5"), 360),
        ("2026-02", Decimal(1), 240),
    ]
    assert r.segments[0].end == r.segments[1].start == at("2026-02-01T00:00")


def test_billing_months_in_another_time_zone() -> None:
    # Berlin is UTC+1 in winter: February starts at 2026-01-31T23:00Z there.
    r = rate_occupancy(
        occupancy("2026-01-31T22:30", "2026-02-01T01:00"), demo(), calendar_months("Europe/Berlin")
    )
    assert [(li.period, li.quantity, li.amount_minor) for li in r.lines] == [
        ("2026-01", Decimal("0.5"), 120),
        ("2026-02", Decimal(2), 480),
    ]
    period = calendar_months("Europe/Berlin")(at("2026-07-15T00:00"))
    assert (period.key, period.start, period.end) == (
        "2026-07",
        at("2026-06-30T22:00"),
        at("2026-07-31T22:00"),
    )


def test_spot_price_change_mid_run_is_honoured() -> None:
    s = PriceSchedule(
        [
            book("a", "2026-03-01T00:00", {"gpu/any": "2.40"}, {"gpu/any": "0.90"}),
            spot("gpu/any", "1.20", "2026-03-10T06:00"),
            spot(A100, "9.99", "2026-03-10T06:30"),  # another key: no split for gpu/any
            book("b", "2026-03-10T08:00", {"gpu/any": "2.40"}, {"gpu/any": "0.80"}),
        ]
    )
    r = rate_occupancy(occupancy("2026-03-10T05:00", "2026-03-10T09:00", mode="spot"), s)
    line = r.line("2026-03", "gpu/any")
    assert [(seg.rate.rate, seg.quantity) for seg in line.segments] == [
        (Decimal("0.90"), Decimal(1)),
        (Decimal("1.20"), Decimal(2)),
        (Decimal("0.80"), Decimal(1)),
    ]
    assert (line.amount, line.amount_minor) == (Decimal("4.1"), 410)
    # public mode ignores spot changes: book b only splits, same rate
    pub = rate_occupancy(occupancy("2026-03-10T05:00", "2026-03-10T09:00"), s)
    assert pub.total_minor == 960


def test_quota_mode_charges_zero_and_reports_quantity() -> None:
    occ = occupancy("2026-01-02T00:00", "2026-01-02T08:00", mode="quota", cpu_milli=4000)
    r = rate_occupancy(occ, demo())
    assert [(li.resource, li.quantity, li.amount_minor) for li in r.lines] == [
        ("cpu", Decimal(32), 0),
        ("gpu/any", Decimal(8), 0),
    ]
    assert r.total_minor == 0
    # prepaid usage is reported even before the first price book
    early = occupancy("2025-12-31T22:00", "2026-01-01T02:00", mode="quota")
    assert [li.quantity for li in rate_occupancy(early, demo()).lines] == [Decimal(2), Decimal(2)]


def test_idle_is_public_times_the_multiplier() -> None:
    occ = occupancy("2026-01-02T00:00", "2026-01-02T10:00", mode="idle", cpu_milli=1000)
    r = rate_occupancy(occ, demo())
    gpu = r.line("2026-01", "gpu/any")
    assert gpu.segments[0].rate.rate == Decimal("2.40") * Decimal("0.30")
    assert (gpu.amount, gpu.amount_minor) == (Decimal("7.2"), 720)  # public would be 2400
    assert r.line("2026-01", "cpu").amount == Decimal("0.144")  # 10 x 0.048 x 0.30


def test_per_model_key_precedence_in_rating() -> None:
    s = PriceSchedule([book("a", "2026-01-01T00:00", {"gpu/any": "2.40", A100: "3.50"})])
    a100 = rate_occupancy(occupancy("2026-01-02T00:00", "2026-01-02T01:00", flavor=A100), s)
    h100 = rate_occupancy(occupancy("2026-01-02T00:00", "2026-01-02T01:00", flavor="gpu/H100"), s)
    assert (a100.lines[0].resource, a100.total_minor) == (A100, 350)
    assert (h100.lines[0].resource, h100.total_minor) == ("gpu/H100", 240)


@pytest.mark.parametrize(
    ("rate", "minor"), [("0.25", 12), ("0.27", 14), ("0.29", 14), ("0.31", 16)]
)
def test_line_amount_rounds_half_even(rate: str, minor: int) -> None:
    # half an hour of one GPU: 0.125, 0.135, 0.145, 0.155
    s = PriceSchedule([book("a", "2026-01-01T00:00", {"gpu/any": rate})])
    r = rate_occupancy(occupancy("2026-01-02T00:00", "2026-01-02T00:30"), s)
    assert r.total_minor == minor


def test_rounding_happens_once_per_line_not_per_segment() -> None:
    # Two segments of 0.004 each: rounding each would give 0 + 0; the line is 0.008 -> 1 cent.
    s = PriceSchedule(
        [
            book("a", "2026-01-01T00:00", {"gpu/any": "0.008"}),
            book("b", "2026-01-02T00:30", {"gpu/any": "0.008"}),
        ]
    )
    line = rate_occupancy(occupancy("2026-01-02T00:00", "2026-01-02T01:00"), s).lines[0]
    assert [seg.amount for seg in line.segments] == [Decimal("0.004"), Decimal("0.004")]
    assert line.amount_minor == 1


def test_fractional_gpu_and_odd_seconds_stay_exact() -> None:
    # 250 mGPU for 1 s at 2.40/GPU-h: 0.25/3600 h, a repeating decimal in hours.
    r = rate_occupancy(occupancy("2026-01-02T00:00:00", "2026-01-02T00:00:01", mgpu=250), demo())
    line = r.lines[0]
    assert line.usage == 250 * 1_000_000
    assert line.quantity_exact == Fraction(1, 14400)
    assert line.amount_exact == Fraction(1, 6000)
    assert line.quantity == Decimal("0.00006944444444444444444444444444444444444444")  # 40 digits
    assert line.amount_minor == 0


def test_no_rate_or_no_book_is_an_error() -> None:
    with pytest.raises(NoApplicableRate):
        rate_occupancy(occupancy("2025-12-31T23:00", "2026-01-01T01:00"), demo())
    s = PriceSchedule([book("a", "2026-01-01T00:00", {"gpu/any": "2.40"})])
    with pytest.raises(NoApplicableRate, match="spot"):
        rate_occupancy(occupancy("2026-01-02T00:00", "2026-01-02T01:00", mode="spot"), s)
    with pytest.raises(ValueError, match="no price book"):
        rate_occupancy(occupancy("2026-01-02T00:00", "2026-01-02T01:00"), PriceSchedule())


def test_open_interval_and_events() -> None:
    started = OccupancyStarted(
        occupancy_id="o", job_uid="j", pod_uid="p", mgpu=1000, cpu_milli=0, memory_mib=0,
        workspace="ws", started_at=at("2026-01-02T00:00"),
    )  # fmt: skip
    occ = Occupancy.from_events(started)
    with pytest.raises(ValueError, match="still open"):
        rate_occupancy(occ, demo())
    assert rate_to_date(occ, demo(), at("2026-01-02T02:00")).total_minor == 480
    assert rate_to_date(occ, demo(), at("2026-01-01T00:00")).lines == ()
    ended = OccupancyEnded(occupancy_id="o", job_uid="j", pod_uid="p",
                           ended_at=at("2026-01-02T01:00"))  # fmt: skip
    closed = Occupancy.from_events(started, ended)
    assert rate_to_date(closed, demo(), at("2026-02-01T00:00")).total_minor == 240


# --- properties ---------------------------------------------------------------------

zones = st.sampled_from(["UTC", "Europe/Berlin", "America/Los_Angeles", "Asia/Kolkata"])


@settings(max_examples=80, deadline=None)
@given(occupancies(), st.floats(0, 1), zones)
def test_rating_is_additive_under_any_split(occ: Occupancy, frac: float, tz: str) -> None:
    assert occ.end is not None
    periods = calendar_months(tz)
    cut = occ.start + (occ.end - occ.start) * frac
    whole = rate_occupancy(occ, SCHEDULE, periods)
    left = rate_interval(occ, SCHEDULE, occ.start, cut, periods)
    right = rate_interval(occ, SCHEDULE, cut, occ.end, periods)
    for line in whole.lines:
        parts = [
            seg
            for r in (left, right)
            for seg in r.segments
            if (seg.period, seg.resource) == (line.period, line.resource)
        ]
        assert sum(seg.usage for seg in parts) == line.usage
        assert sum((seg.quantity_exact for seg in parts), Fraction(0)) == line.quantity_exact
        assert sum((seg.amount_exact for seg in parts), Fraction(0)) == line.amount_exact
    # segments tile the interval with no gap or overlap, each inside one period
    for line in whole.lines:
        for seg in line.segments:
            p = periods(seg.start)
            assert p.key == seg.period and p.start <= seg.start < seg.end <= p.end
    by_resource: dict[str, list[tuple[datetime, datetime]]] = {}
    for seg in whole.segments:
        by_resource.setdefault(seg.resource, []).append((seg.start, seg.end))
    for spans in by_resource.values():
        spans.sort()
        assert spans[0][0] == occ.start and spans[-1][1] == occ.end
        assert all(x[1] == y[0] for x, y in pairwise(spans))


@settings(max_examples=60, deadline=None)
@given(occupancies(), st.lists(micros, max_size=12))
def test_accrual_deltas_sum_to_the_final_amount(occ: Occupancy, ticks: list[int]) -> None:
    assert occ.end is not None
    final = rate_occupancy(occ, SCHEDULE)
    posted: dict[LineKey, Posted] = {}
    for tick in sorted(ticks):
        posted = totals_after(
            posted, accrue(occ, SCHEDULE, T0 + timedelta(microseconds=tick), posted)
        )
    last = accrue(occ, SCHEDULE, occ.end, posted)
    assert all(d.final for d in last)
    posted = totals_after(posted, last)
    # one posted total per line x rate part, at sub-minor precision
    assert {k: v for k, v in posted.items() if v != Posted()} == {
        li.key._replace(rate=rate): Posted(usage, precise)
        for li in final.lines
        for rate, (_, usage, precise) in li.parts().items()
    }
    assert sum(p.amount_precise for p in posted.values()) == final.total_precise
    # nothing left to post afterwards, however late the next tick
    assert accrue(occ, SCHEDULE, occ.end + timedelta(days=400), posted) == ()


def test_accrual_corrects_a_shortened_interval_with_negative_deltas() -> None:
    running = occupancy("2026-01-31T20:00", None)
    posted = totals_after({}, accrue(running, SCHEDULE, at("2026-02-01T04:00")))
    assert sum(p.amount_precise for p in posted.values()) > 0
    ended_early = occupancy("2026-01-31T20:00", "2026-01-31T22:00")
    deltas = accrue(ended_early, SCHEDULE, at("2026-02-01T05:00"), posted)
    assert [(d.key.period, d.amount_precise < 0) for d in deltas] == [
        ("2026-01", True),
        ("2026-02", True),
    ]
    posted = totals_after(posted, deltas)
    assert (
        sum(p.amount_precise for p in posted.values())
        == rate_occupancy(ended_early, SCHEDULE).total_precise
    )


def test_rating_naive_datetimes_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        occupancy(datetime(2026, 1, 1), None)
    assert occupancy(datetime(2026, 1, 1, tzinfo=UTC), None).end is None
