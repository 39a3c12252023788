"""``report quota-history --step hour|day``: a series a chart can draw, each point equal to
``quota-usage --at`` that instant."""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from dlc_ledger.cli.tables import render_table
from ledger.store.postgres import PostgresEventStore
from ledger.usage_boards import NUMBERS
from projections.quotas.reads import usage_at
from tests.support.clis import CliCall
from tests.support.demo_files import DEMO_QUOTAS as DEMO
from tests.support.quotas import at, occ_ended, occ_started

HOUR = 3600


def _history(store: PostgresEventStore, cli: CliCall, tmp_path: Path) -> None:
    cli("quotas", "apply", str(DEMO), "--at", "2026-11-01")  # a bare date: midnight UTC
    store.append(
        [
            occ_started("p1", "j1", "ws-be", at(HOUR / 2), mode="idle", mgpu=2000),
            occ_ended("p1", "j1", at(2 * HOUR)),  # ends on a step boundary
            occ_started("p2", "j2", "ws-ls", at(HOUR), mgpu=40000),  # starts on one
            occ_ended("p2", "j2", at(26 * HOUR + 900)),  # the next day
            occ_started("p3", "j3", "ws-burstable", at(4 * HOUR - 1), mgpu=30000),
            occ_ended("p3", "j3", at(5 * HOUR + 1)),
        ]
    )
    # the tree changes on a boundary too: be's max halves at 04:00
    smaller = tmp_path / "smaller.yaml"
    smaller.write_text(
        DEMO.read_text().replace(
            "max: {gpu/any: 40000, cpu: 600000", "max: {gpu/any: 20000, cpu: 600000"
        )
    )
    assert "changed quota be" in cli("quotas", "apply", str(smaller), "--at", "2026-11-01T04:00Z")


def _by_instant(rows: list[dict[str, Any]]) -> dict[str, dict[tuple[str, str], tuple[int, ...]]]:
    out: dict[str, dict[tuple[str, str], tuple[int, ...]]] = defaultdict(dict)
    for r in rows:
        out[r["at"]][(r["quota"], r["flavor"])] = tuple(r[n] for n in NUMBERS)
    return out


def _usage_at(store: PostgresEventStore, instant: str) -> dict[tuple[str, str], tuple[int, ...]]:
    from dlc_ledger.cli.options import parse_instant

    with store.engine.connect() as conn:
        return {
            (u.quota, u.flavor): tuple(getattr(u, n) for n in NUMBERS)
            for u in usage_at(conn, parse_instant(instant))
        }


def test_hourly_and_daily_series_equal_the_usage_at_each_step_start(
    store: PostgresEventStore, cli: CliCall, tmp_path: Path
) -> None:
    _history(store, cli, tmp_path)
    hourly = _by_instant(
        json.loads(cli("report", "quota-history", "--step", "hour", "--format", "json"))
    )
    # from the step of the first change (the tree, 11-01 00:00) to the latest (11-02 02:15)
    assert len(hourly) == 27
    assert min(hourly) == "2026-11-01T00:00:00Z" and max(hourly) == "2026-11-02T02:00:00Z"
    for instant, rows in hourly.items():
        assert rows == _usage_at(store, instant), instant
    used = {i: rows[("be", "gpu/any")][NUMBERS.index("used")] for i, rows in hourly.items()}
    # [start, end): p1 counts at 01:00, not at 02:00 when it ended
    assert [used[f"2026-11-01T0{h}:00:00Z"] for h in range(4)] == [0, 2000, 0, 0]
    maxes = {i: rows[("be", "gpu/any")][NUMBERS.index("max")] for i, rows in hourly.items()}
    assert maxes["2026-11-01T03:00:00Z"] == 40000 and maxes["2026-11-01T04:00:00Z"] == 20000
    daily = _by_instant(json.loads(cli("report", "quota-history", "--format", "json")))
    assert sorted(daily) == ["2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z"]  # day: the default
    for instant, rows in daily.items():
        assert rows == _usage_at(store, instant), instant


def test_a_series_narrowed_to_a_window_quota_and_flavor(
    store: PostgresEventStore, cli: CliCall, tmp_path: Path
) -> None:
    _history(store, cli, tmp_path)
    out = cli(
        "report", "quota-history", "--step", "hour", "--quota", "ls", "--flavor", "gpu/any",
        "--from", "2026-11-01T00:30:00Z", "--to", "2026-11-01T03:00:00+01:00", "--format", "csv",
    )  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["at"], r["quota"], r["flavor"], r["used"]) for r in rows] == [
        ("2026-11-01T00:00:00Z", "ls", "gpu/any", "0"),  # the step holding --from
        ("2026-11-01T01:00:00Z", "ls", "gpu/any", "40000"),
        ("2026-11-01T02:00:00Z", "ls", "gpu/any", "40000"),  # --to is 02:00 UTC
    ]
    assert {"min", "max", "borrowed", "lent", "queued", "unit"} <= set(rows[0])
    table = cli(
        "report", "quota-history", "--step", "hour", "--quota", "ls", "--flavor", "gpu/any",
        "--from", "2026-11-01T01:00Z", "--to", "2026-11-01T01:00Z",
    )  # fmt: skip
    assert "40,000" in table  # the one table rule: thousands separated
    refused = cli("report", "quota-history", "--step", "minute", ok=False)
    assert "--step 'minute'" in refused


def test_the_one_table_rule() -> None:
    table = render_table(
        [{"name": "a", "n": 1234567, "x": None}, {"name": "bb", "n": 5, "x": None}]
    ).splitlines()
    assert table == [
        "name          n  x",
        "----  ---------  -",
        "a     1,234,567  -",
        "bb            5  -",
    ]
