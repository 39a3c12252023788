"""The dashboard's formats (dashboard/format.js, window.js) run in the browser on chosen
values: GPUs, cores and GiB to one decimal, durations as their two largest units, the one
time format and its parsing (a wrong instant refused, naming the format), GPU-hours,
money as the API's strings, shares and the presets' windows. The same values are also
written by the tests' own formats (tests/dlc_ledger/dashboard/pages.py), which the view tests
compare pages with: the two must agree.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page

from tests.dlc_ledger.dashboard.pages import duration, hours, instant, quantity, share
from tests.support.dashboard import Served, Watched


@pytest.fixture
def page(watched: Watched, served: Served) -> Page:
    watched.page.goto(served.base)  # the modules are served from the app's origin
    return watched.page


def run(page: Page, module: str, call: str, *args: Any) -> Any:
    """``call`` (a function of the module's exports ``m`` and ``args``) in the page."""
    return page.evaluate(
        f"async args => {{ const m = await import('./dashboard/{module}');"
        f" return ({call})(m, args); }}",
        list(args),
    )


QUANTITIES = [
    (41490, "mGPU", "41.5"),
    (41450, "mGPU", "41.5"),
    (41449, "mGPU", "41.4"),
    (500, "mGPU", "0.5"),
    (0, "mGPU", "0.0"),
    (-1550, "mGPU", "-1.6"),
    (1_200_000, "milli-cores", "1,200.0"),
    (1536, "MiB", "1.5"),
    (4_000_000, "MiB", "3,906.3"),
    (14233.333333333334, "mGPU", "14.2"),
]


def test_quantities_in_gpus_cores_and_gib(page: Page) -> None:
    shown = run(page, "format.js", "(m, xs) => xs.map(([v, u]) => m.quantity(v, u))", *QUANTITIES)
    assert shown == [text for _, _, text in QUANTITIES]
    assert [quantity(v, u) for v, u, _ in QUANTITIES] == shown
    units = run(page, "format.js", "m => ['mGPU', 'milli-cores', 'MiB'].map(m.unitName)")
    assert units == ["GPUs", "cores", "GiB"]


def test_durations_and_shares(page: Page) -> None:
    seconds = [273_600, 86_400, 3725, 42, 0, 12_537_496, 0.4, 59.5, 3599]
    shown = run(page, "format.js", "(m, xs) => xs.map(m.duration)", *seconds)
    assert shown[:6] == ["3d 4h", "1d", "1h 2m", "42s", "0s", "145d 2h"]
    assert shown == [duration(s) for s in seconds]
    shares = [(1, 3), (2, 3), (0, 0), (5, 0), (15330, 14000)]
    assert run(page, "format.js", "(m, xs) => xs.map(([p, w]) => m.share(p, w))", *shares) == [
        share(p, w) for p, w in shares
    ]


def test_hours_and_money_are_written_as_the_api_gives_them(page: Page) -> None:
    values = ["10443.370206", "10443.35", "0.05", "0.04999", "-1.25", "0", "1234567.95"]
    shown = run(page, "format.js", "(m, xs) => xs.map(m.hours)", *values)
    assert shown == ["10,443.4", "10,443.4", "0.1", "0.0", "-1.3", "0.0", "1,234,568.0"]
    assert shown == [hours(v) for v in values]
    money = run(
        page,
        "format.js",
        "m => [m.money({cost_display: '1,267.21 USD', cost_minor: 126721}), m.money(null),"
        " m.money({total_display: '3.00 EUR'}, 'total'), m.money({cost_minor: 1})]",
    )
    assert money == ["1,267.21 USD", "\u2013", "3.00 EUR", "\u2013"]


def test_one_time_format_written_and_read(page: Page) -> None:
    instants = ["2027-03-29T14:05:59Z", "2027-03-29T00:00:00.123456+00:00", "2026-12-31T23:59:00Z"]
    shown = run(page, "format.js", "(m, xs) => xs.map(m.instant)", *instants)
    assert shown == ["2027-03-29 14:05Z", "2027-03-29 00:00Z", "2026-12-31 23:59Z"]
    assert shown == [instant(v) for v in instants]
    typed = [
        "2027-03-29 14:05Z",
        "2027-03-29 14:05",
        "2027-03-29T14:05Z",
        "2027-03-29",
        " 2027-03-29 14:05 UTC ",
        "",
    ]
    assert run(page, "format.js", "(m, xs) => xs.map(m.parseInstant)", *typed) == [
        "2027-03-29T14:05:00Z",
        "2027-03-29T14:05:00Z",
        "2027-03-29T14:05:00Z",
        "2027-03-29T00:00:00Z",
        "2027-03-29T14:05:00Z",
        "",
    ]
    wrong = ["03/29/2027, 12:00 AM", "2027-02-30 10:00Z", "2027-03-29 24:00Z", "2027-13-01", "8am"]
    errors = run(
        page,
        "format.js",
        "(m, xs) => xs.map(x => { try { m.parseInstant(x); return null; }"
        " catch (e) { return e.message; } })",
        *wrong,
    )
    assert all(e and "YYYY-MM-DD HH:MMZ" in e for e in errors), errors


def test_the_presets_windows_over_the_extent(page: Page) -> None:
    span = {"first": "2026-11-01T00:00:30Z", "last": "2027-04-10T23:57:43Z"}
    windows = run(
        page,
        "window.js",
        "(m, [span]) => ['24h', '7d', 'month', 'all'].map(p => m.windowOf({preset: p}, span))",
        span,
    )
    assert windows == [
        {"from": "2027-04-09T23:58:00Z", "to": "2027-04-10T23:58:00Z", "preset": "24h"},
        {"from": "2027-04-03T23:58:00Z", "to": "2027-04-10T23:58:00Z", "preset": "7d"},
        {"from": "2027-04-01T00:00:00Z", "to": "2027-04-10T23:58:00Z", "preset": "month"},
        {"from": "2026-11-01T00:00:00Z", "to": "2027-04-10T23:58:00Z", "preset": "all"},
    ]
    # a typed window wins over a preset; none at all is no window
    typed = run(
        page,
        "window.js",
        "(m, [span]) => [m.windowOf({preset: '7d', from: '2027-01-01T00:00:00Z'}, span),"
        " m.windowOf({}, span)]",
        span,
    )
    assert typed == [
        {"from": "2027-01-01T00:00:00Z", "to": "", "preset": ""},
        {"from": "", "to": "", "preset": ""},
    ]
