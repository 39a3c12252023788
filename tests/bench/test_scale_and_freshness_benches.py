"""``python -m bench scale`` and ``python -m bench freshness`` at a tiny size: both run the
production processes end to end and print their figures as JSON on the last line."""

from __future__ import annotations

import json

import pytest

from bench import freshness, scale


def test_scale_bench_ingests_every_event_at_each_consumer_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--events", "3000", "--consumers", "1,2", "--lanes", "1,2", "--idle-exit", "3"]
    assert scale.main(argv) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert [row["consumers"] for row in result["ingest"]] == [1, 2]
    assert all(row["stored"] == 3000 and row["events_per_s"] > 0 for row in result["ingest"])
    assert [row["lanes"] for row in result["lanes"]] == [1, 2]
    assert all(row["events_per_s"] > 0 for row in result["lanes"])


def test_freshness_bench_measures_rated_pods(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--speeds", "360000", "--seconds", "20", "--billing-interval", "0.5"]
    assert freshness.main(argv) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    (run,) = result["runs"]
    for way in ("rated", "posted"):
        figures = run[way]
        assert figures["pods"] > 0, run
        assert 0 < figures["p50_s"] <= figures["p99_s"] <= figures["max_s"] < 20, run
    # the rated source shows a pod before its first accrual is posted
    assert run["rated"]["p50_s"] <= run["posted"]["p50_s"], run
