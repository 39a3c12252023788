"""``python -m bench partitions`` at a tiny size: both copies of ``events`` are built and
measured, every figure comes out positive on the JSON last line, and the scratch schema
is gone afterwards (the bench's database is dropped with it here)."""

from __future__ import annotations

import json

import pytest

from bench.partitions import main

FIGURES = (
    "copy_flat_events_per_s", "copy_monthly_events_per_s",
    "append_flat_events_per_s", "append_monthly_events_per_s",
    "stream_read_p50_ms_flat", "stream_read_p99_ms_flat",
    "stream_read_p50_ms_monthly", "stream_read_p99_ms_monthly",
    "page_p50_ms_flat", "page_p99_ms_flat", "page_p50_ms_monthly", "page_p99_ms_monthly",
    "day_p50_ms_flat", "day_p50_ms_monthly", "chain_walk_s_flat", "chain_walk_s_monthly",
    "retention_detach_ms", "retention_delete_ms",
    "size_mb_flat", "size_mb_monthly", "size_mb_event_keys",
)  # fmt: skip


def test_partitions_bench_reports_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--events", "3000"]) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert result["events"] >= 2_900
    assert result["partitions"] >= 4  # the bench store's cluster clock spans four months
    for key in FIGURES:
        assert result[key] > 0, (key, result)
    assert result["stream_read_p50_ms_flat"] <= result["stream_read_p99_ms_flat"]
    assert result["page_p50_ms_monthly"] <= result["page_p99_ms_monthly"]
    assert result["size_mb_monthly"] > result["size_mb_event_keys"]
