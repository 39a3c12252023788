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
