"""``python -m bench api`` at a tiny size: the store builds through the production
paths, the real server answers every dashboard call, and the figures come out."""

from __future__ import annotations

import json

import pytest

from bench.api import CALLS, main


def test_api_bench_runs_every_call(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--events", "3000", "--clients", "2", "--requests", "4", "--budget", "2"]) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert result["events"] >= 2_900
    assert set(result["calls"]) == set(CALLS)
    for name, row in result["calls"].items():
        assert row["http"] is not None, f"{name}: route {row['route']} not served"
        for figures in (row["http"], row["http_1"], row["direct"], row["direct_1"]):
            assert figures["samples"] >= 1
            assert 0 < figures["p50_ms"] <= figures["p99_ms"]
