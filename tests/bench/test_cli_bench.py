"""``python -m bench cli`` at its smallest: one projected job, one round; the three figures
and the ratios come out, and the job shown is the one listed."""

from __future__ import annotations

import json

import pytest

from bench.cli import main
from ledger.store.postgres import PostgresEventStore
from projections.registry import catch_up_all
from tests.support.factories import job_succeeded, occupancy_started


def test_cli_bench_times_help_and_a_read_against_the_baseline(
    store: PostgresEventStore, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store.append([occupancy_started(1), job_succeeded(1)])
    catch_up_all(store)
    assert main(["--repeat", "1", "--database-url", database_url]) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert result["job_uid"] == "job-1"
    for name in ("baseline", "help", "jobs_show"):
        assert 0 < result[f"{name}_min_s"] <= result[f"{name}_median_s"]
    assert result["help_ratio"] > 0 and result["jobs_show_ratio"] > 0
