"""Which replica of a spilling service runs beyond its quota's capacity (pure)."""

from __future__ import annotations

from ledger.events import QuotaSpec
from ledger.quotas import spills

SPEC = QuotaSpec(quota_id="team", min={"gpu/any": 16000, "gpu/A100": 8000})


def test_a_replica_spills_when_the_quota_s_capacity_is_held() -> None:
    assert not spills(SPEC, "gpu/any", 8000, [("gpu/any", 8000)])  # 16 of 16: fits
    assert spills(SPEC, "gpu/any", 8000, [("gpu/any", 8000), ("gpu/T4", 1000)])  # T4: gpu/any
    assert spills(SPEC, "gpu/any", 17000, [])  # larger than the whole quota


def test_a_model_the_quota_names_counts_against_its_own_entry() -> None:
    held = [("gpu/any", 16000)]
    assert not spills(SPEC, "gpu/A100", 8000, held)  # A100 counts against its own 8 GPUs
    assert spills(SPEC, "gpu/A100", 8000, [*held, ("gpu/A100", 1000)])


def test_no_gpu_never_spills_and_no_capacity_always_does() -> None:
    assert not spills(SPEC, "gpu/any", 0, [("gpu/any", 99000)])
    assert spills(QuotaSpec(quota_id="cpu-only", min={"cpu": 4000}), "gpu/any", 1000, [])
