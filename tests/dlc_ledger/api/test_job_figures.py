"""``/v1/jobs`` for a dashboard (issue 36): ``q`` searches names and uid prefixes in the
query, and each job carries its GPU request and model, GPU-hours and cost so far."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dlc_ledger.api.app import create_app
from dlc_ledger.presenters import gpu_hours, gpu_model, gpu_request_mgpu
from ledger.store.postgres import PostgresEventStore
from tests.dlc_ledger.api.finance_data import seed_costs
from tests.support.api import bearer


@pytest.fixture
def costs(store: PostgresEventStore) -> Iterator[TestClient]:
    seed_costs(store)
    with TestClient(create_app(store), raise_server_exceptions=False) as client:
        yield client


def _jobs(client: TestClient, token: str, **params: Any) -> dict[str, Any]:
    response = client.get("/v1/jobs", params=params, headers=bearer(token))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _uids(client: TestClient, token: str, **params: Any) -> list[str]:
    return [j["job_uid"] for j in _jobs(client, token, **params)["items"]]


def test_gpu_figures_rules() -> None:
    two = [{"count": 2, "mgpu": 500, "flavor": "gpu/H100"}, {"count": 1, "mgpu": 0}]
    assert gpu_request_mgpu(two) == 1000
    assert gpu_model(two, ["gpu/T4"]) == "H100"  # named by the replicas first
    assert gpu_model([{"mgpu": 1000, "flavor": "gpu/any"}], ["gpu/T4", "gpu/V100"]) == "T4, V100"
    assert gpu_model([{"mgpu": 1000, "flavor": "gpu/any"}], ["gpu/any"]) is None
    assert gpu_model([{"mgpu": 0, "flavor": "cpu"}], []) is None
    assert (gpu_hours(0), gpu_hours(6000), gpu_hours(5_418_000)) == ("0", "0.001667", "1.505")
    assert gpu_hours(1800) == "0.0005"  # to the micro-GPU-hour, half-even


def test_q_finds_names_in_any_case_and_uid_prefixes(
    costs: TestClient, tokens: dict[str, str]
) -> None:
    admin = tokens["admin"]
    assert _uids(costs, admin, q="llama") == ["u-1", "t-big"]  # newest submission first
    assert _uids(costs, admin, q="RESNET") == ["t-2", "t-1"]
    assert _uids(costs, admin, q="t-") == ["t-big", "t-3", "t-2", "t-1"]  # uid prefixes
    assert _uids(costs, admin, q="-1") == []  # a uid matches by its prefix only
    assert _uids(costs, admin, q="_") == ["t-3"]  # bert_3: LIKE's wildcards are plain text
    assert _uids(costs, admin, q="%") == []
    assert _uids(costs, admin, q="") == ["u-1", "t-big", "t-3", "t-2", "t-1"]
    assert _uids(costs, tokens["lead-a"], q="llama") == ["t-big"]  # and the token's scope
    assert _uids(costs, admin, q="llama", workspace="ws-b") == ["u-1"]
    first = _jobs(costs, admin, q="t-", limit=3)
    rest = _jobs(costs, admin, q="t-", limit=3, cursor=first["next_cursor"])
    assert [j["job_uid"] for j in first["items"] + rest["items"]] == ["t-big", "t-3", "t-2", "t-1"]
    assert rest["next_cursor"] is None
    too_long = costs.get("/v1/jobs", params={"q": "x" * 201}, headers=bearer(admin))
    assert too_long.status_code == 422


def test_each_job_with_its_gpus_and_cost_so_far(costs: TestClient, tokens: dict[str, str]) -> None:
    jobs = {j["job_uid"]: j for j in _jobs(costs, tokens["finance"])["items"]}
    figures = ("gpu_request_mgpu", "gpu_model", "mgpu_seconds", "gpu_hours", "cost_minor",
               "cost_minor_precise", "currency", "scale", "cost_display")  # fmt: skip
    assert {k: jobs["t-big"][k] for k in figures} == {
        "gpu_request_mgpu": 2000,
        "gpu_model": "A100",
        "mgpu_seconds": 3_600_000,
        "gpu_hours": "1",
        "cost_minor": 240,
        "cost_minor_precise": "240",
        "currency": "USD",
        "scale": 2,
        "cost_display": "2.40 USD",
    }
    assert (jobs["t-big"]["name"], jobs["t-big"]["user"], jobs["t-big"]["quota"]) == (
        "LLaMA big", "bob", "q-ws-a"
    )  # fmt: skip
    assert {k: jobs["t-1"][k] for k in figures} == {
        "gpu_request_mgpu": 1000,
        "gpu_model": None,
        "mgpu_seconds": 6000,
        "gpu_hours": "0.001667",
        "cost_minor": 0,  # 0.4 cent: the job's own rounding
        "cost_minor_precise": "0.4",
        "currency": "USD",
        "scale": 2,
        "cost_display": "0.00 USD",
    }
    assert jobs["u-1"]["gpu_model"] == "T4"  # the node it ran on
    as_csv = costs.get("/v1/jobs?format=csv&q=big", headers=bearer(tokens["admin"])).text
    header, row = as_csv.splitlines()
    assert "gpu_hours" in header.split(",") and "2.40 USD" in row


def test_a_job_not_billed_yet_costs_zero_in_the_billing_currency(
    client: TestClient, tokens: dict[str, str]
) -> None:
    # seed_jobs: a price book and four one-hour jobs, no billing tick
    jobs = _jobs(client, tokens["lead-ac"])["items"]
    assert [j["job_uid"] for j in jobs] == ["c-1", "a-2", "a-1"]
    for job in jobs:
        assert (job["cost_minor"], job["cost_display"], job["gpu_hours"]) == (0, "0.00 USD", "1")
