"""The shared sample scenarios and our own (tests/ledger/dispatch/scenarios/), via the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlc_ledger.services.yaml_files import load_yaml
from tests.support.clis import cli_caller

SHARED = Path(__file__).resolve().parent / "scenarios" / "samples"  # copies of ../shared/scenarios
OWN = Path(__file__).resolve().parent / "scenarios"
FILES = sorted(SHARED.glob("*.yaml")) + sorted(OWN.glob("*.yaml"))


def test_the_scenarios_are_there() -> None:
    assert len(sorted(OWN.glob("*.yaml"))) >= 3


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_scenario_matches_its_expectation(path: Path) -> None:
    expect = load_yaml(path.read_text(encoding="utf-8"))["expect"]
    out = cli_caller()("dispatcher", "simulate", "--scenario", str(path))
    decision = json.loads(out)
    assert set(decision) == {"job", "outcome", "victims"}
    assert decision["outcome"] == expect["outcome"]
    got = {v["job"]: v["reason"] for v in decision["victims"]}
    assert got == dict(expect.get("victims") or {})


def test_a_bad_scenario_is_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("quotas: []\nincoming: {job: x, quota: q}\n", encoding="utf-8")
    out = cli_caller()("dispatcher", "simulate", "--scenario", str(bad), ok=False)
    assert "quotas" in out


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ("fair_sharing: {enabled: yes please}\n", "fair_sharing.enabled"),
        (
            "fair_sharing: {enabled: true, preemption_strategies: [Fairest]}\n",
            "preemption_strategies[0]",
        ),
        ("fair_sharing: {enabled: true, preemption_strategies: []}\n", "preemption_strategies"),
    ],
)
def test_bad_fair_sharing_settings_name_the_field(tmp_path: Path, extra: str, field: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        extra + "quotas: [{name: q, min: {cpu: 1}}]\n"
        "incoming: {job: x, quota: q, created_at: '2026-01-01T00:00:00Z'}\n",
        encoding="utf-8",
    )
    out = cli_caller()("dispatcher", "simulate", "--scenario", str(bad), ok=False)
    assert field in out


def test_a_bad_billing_mode_names_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "quotas: [{name: q, min: {cpu: 1}}]\n"
        "incoming: {job: x, quota: q, billing_mode: free, created_at: '2026-01-01T00:00:00Z'}\n",
        encoding="utf-8",
    )
    out = cli_caller()("dispatcher", "simulate", "--scenario", str(bad), ok=False)
    assert "incoming.billing_mode" in out


DATA = Path(__file__).resolve().parents[3] / "data" / "scenarios"


@pytest.mark.parametrize("path", sorted(DATA.glob("*.yaml")), ids=lambda p: p.stem)
def test_data_scenario_matches_its_expectation(path: Path) -> None:
    """data/scenarios/: the shared samples (one decision) and the cycle scenarios."""
    expect = load_yaml(path.read_text(encoding="utf-8"))["expect"]
    out = json.loads(cli_caller()("dispatcher", "simulate", "--scenario", str(path)))
    if "outcome" in expect:
        assert out["outcome"] == expect["outcome"]
        assert {v["job"]: v["reason"] for v in out["victims"]} == dict(expect.get("victims") or {})
        return
    cycles, report = out["cycles"], out["preemptions"]
    assert [job for c in cycles for job in c["admitted"]] == expect["admitted"]
    assert [job for c in cycles for job in c["spilled"]] == expect.get("spilled", [])
    assert {r["victim"]: r["reason"] for r in report} == expect["preempted"]
    assert {r["victim"]: r["preemptor"] for r in report} == expect["preemptors"]
    refused = {r["job"]: r["reason"] for c in cycles for r in c["refused"]}
    assert refused == expect["refused"]
    assert sorted(p["job"] for p in cycles[-1]["pending"]) == expect["waiting"]
    assert round(sum(r["lost_gpu_hours"] for r in report), 6) == expect["lost_gpu_hours"]
    # the report says who preempted whom: services taking training jobs, never the reverse
    assert all(
        (r["preemptor_workload"], r["victim_workload"]) == ("service", "job") for r in report
    )


def test_the_integrated_example_step_by_step() -> None:
    out = json.loads(
        cli_caller()("dispatcher", "simulate", "--scenario", str(DATA / "integrated-128-gpus.yaml"))
    )
    first = out["cycles"][0]
    # one replica preempts per cycle (the next ones would need its victim: Kueue's
    # overlapping targets); the others wait with their reason and place in quota1's queue
    assert [(p["job"], p["reason"], p["position"]) for p in first["pending"]] == [
        ("inference#4", "PreemptionPending", 1),
        ("inference#5", "WaitingForQuota", 2),
        ("inference#6", "WaitingForQuota", 3),
    ]
    assert first["refused"] == [
        {"job": "notebook-2", "quota": "quota1.2", "reason": "InsufficientQuota"}
    ]
    assert [r["victim_quota"] for r in out["preemptions"]] == ["quota1.1"] * 3
