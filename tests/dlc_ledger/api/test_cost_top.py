"""``/v1/cost/top`` (issue 36): the costliest jobs, users, quotas or workspaces, ordered
and cut in SQL, and the window's total rounded once: ``report cost``'s total to the
minor unit, not the sum of the groups' roundings (three jobs of 0.4 cent each are 0
cents one by one and 1 cent together)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from dlc_ledger.api.app import create_app
from dlc_ledger.services.billing import tick
from ledger.store.postgres import PostgresEventStore
from projections.billing.reports import ROUNDING, ReportWindow
from projections.billing.top import cost_top
from tests.dlc_ledger.api.finance_data import TOTAL_MINOR, seed_costs
from tests.support.api import bearer, without_freshness
from tests.support.builders import EPOCH
from tests.support.clis import CliCall

PROBLEM = "application/problem+json"
TOP = "/v1/cost/top"
NOVEMBER = {"from": "2026-11-01T00:00:00Z", "to": "2026-12-01T00:00:00Z"}
#: off month boundaries: rated from the facts (t-big and u-1 cut at 00:30)
HALF_HOUR = {"from": "2026-11-01T00:00:00Z", "to": "2026-11-01T00:30:00Z"}


@pytest.fixture
def costs(store: PostgresEventStore) -> Iterator[TestClient]:
    seed_costs(store)
    with TestClient(create_app(store), raise_server_exceptions=False) as client:
        yield client


def _top(client: TestClient, token: str, **params: Any) -> dict[str, Any]:
    response = client.get(TOP, params=params, headers=bearer(token))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = without_freshness(response.json())
    return body


def test_the_costliest_jobs_first_with_what_they_are(
    costs: TestClient, tokens: dict[str, str]
) -> None:
    body = _top(costs, tokens["finance"], n=4)
    # by cost, descending; the three jobs of 0.4 cent tie and go by uid
    assert [i["job"] for i in body["items"]] == ["t-big", "u-1", "t-1", "t-2"]
    assert body["count"] == 5 and body["next_cursor"] is None
    assert body["window"] == {"from": None, "to": None}
    big, u1, t1, _ = body["items"]
    assert big == {
        "job": "t-big",
        "name": "LLaMA big",
        "workspace": "ws-a",
        "user": "bob",
        "quota": "q-ws-a",
        "status": "Running",
        "gpu_request_mgpu": 2000,  # two replicas of one GPU
        "gpu_model": "A100",  # what its replicas name
        "mgpu_seconds": 3_600_000,
        "gpu_hours": "1",
        "cost_minor": 240,
        "cost_minor_precise": "240",
        "currency": "USD",
        "scale": 2,
        "cost_display": "2.40 USD",
    }
    assert (u1["gpu_model"], u1["gpu_hours"], u1["workspace"]) == ("T4", "0.5", "ws-b")
    assert (t1["gpu_model"], t1["gpu_hours"], t1["mgpu_seconds"]) == (None, "0.001667", 6000)
    assert (t1["cost_minor"], t1["cost_minor_precise"], t1["cost_display"]) == (
        0,
        "0.4",
        "0.00 USD",
    )
    assert body["total"] == {
        "mgpu_seconds": 5_418_000,
        "gpu_hours": "1.505",
        "cost_minor": TOTAL_MINOR,
        "cost_minor_precise": "361.2",
        "currency": "USD",
        "scale": 2,
        "cost_display": "3.61 USD",
    }


@pytest.mark.parametrize(
    "window",
    [{}, NOVEMBER, HALF_HOUR, {"source": "rated"}, {**NOVEMBER, "source": "ledger"}],
    ids=["all", "november", "half-hour-rated", "rated", "ledger"],
)
def test_the_total_is_report_costs_to_the_minor_unit(
    costs: TestClient, tokens: dict[str, str], cli: CliCall, window: dict[str, str]
) -> None:
    args = [f"--{key}={value}" for key, value in window.items()]
    (report,) = json.loads(cli("report", "cost", "--group-by", "", "--format", "json", *args))
    for by in ("job", "user", "quota", "workspace"):
        body = _top(costs, tokens["admin"], by=by, n=500, **window)
        total = body["total"]
        assert total["cost_minor"] == report["cost_minor"], (by, window)
        assert total["cost_minor_precise"] == report["cost_minor_precise"], (by, window)
        # the groups' exact amounts sum to it; their roundings need not
        assert sum(Decimal(i["cost_minor_precise"]) for i in body["items"]) == Decimal(
            total["cost_minor_precise"]
        )
        assert len(body["items"]) == body["count"]
        # each group as report cost --group-by <by> has it
        grouped = json.loads(cli("report", "cost", "--group-by", by, "--format", "json", *args))
        assert {i[by]: i["cost_minor"] for i in body["items"]} == {
            r[by]: r["cost_minor"] for r in grouped
        }
    jobs = _top(costs, tokens["admin"], n=500, **window)["items"]
    assert sum(i["cost_minor"] for i in jobs) < report["cost_minor"]  # rounded one by one


def test_a_closed_month_totals_its_invoices(
    store: PostgresEventStore, tokens: dict[str, str], cli: CliCall
) -> None:
    seed_costs(store)
    tick(store, EPOCH + timedelta(days=35))  # November closed: one invoice per workspace
    with TestClient(create_app(store)) as client:
        invoices = client.get("/v1/invoices", headers=bearer(tokens["finance"])).json()["items"]
        jobs = _top(client, tokens["finance"], n=500, **NOVEMBER)
        spaces = _top(client, tokens["finance"], by="workspace", **NOVEMBER)
    (report,) = json.loads(cli("report", "cost", "--group-by", "", "--format", "json"))
    assert [i["total_minor"] for i in invoices] == [241, 120]  # ws-a's 241.2 rounded once
    assert jobs["total"]["cost_minor"] == report["cost_minor"] == 361
    assert jobs["total"]["cost_minor_precise"] == "361"
    # the invoice's rounding is a group of its own among jobs, its workspace's by workspace
    (rounding,) = [i for i in jobs["items"] if i["job"] == ROUNDING]
    assert (rounding["cost_minor_precise"], rounding["name"], rounding["gpu_request_mgpu"]) == (
        "-0.2", None, None
    )  # fmt: skip
    assert [(i["workspace"], i["cost_minor_precise"]) for i in spaces["items"]] == [
        ("ws-a", "241"), ("ws-b", "120")
    ]  # fmt: skip


def test_a_rated_window_cuts_the_jobs_that_run_past_it(
    costs: TestClient, tokens: dict[str, str]
) -> None:
    body = _top(costs, tokens["admin"], n=2, **HALF_HOUR)
    assert [(i["job"], i["cost_minor"], i["mgpu_seconds"]) for i in body["items"]] == [
        ("t-big", 108, 1_620_000),  # 27 of its 60 minutes
        ("u-1", 104, 1_560_000),
    ]
    assert (body["count"], body["total"]["cost_minor_precise"]) == (5, "213.2")
    assert body["window"] == HALF_HOUR


def test_groups_by_user_quota_and_workspace(costs: TestClient, tokens: dict[str, str]) -> None:
    users = _top(costs, tokens["admin"], by="user")["items"]
    assert [(i["user"], i["cost_minor"], i["gpu_hours"]) for i in users] == [
        ("bob", 240, "1"), ("carol", 120, "0.5"), ("alice", 1, "0.005")
    ]  # fmt: skip
    assert set(users[0]) == {
        "user", "mgpu_seconds", "gpu_hours", "cost_minor", "cost_minor_precise", "currency",
        "scale", "cost_display",
    }  # fmt: skip
    quotas = _top(costs, tokens["admin"], by="quota", n=1)
    assert [i["quota"] for i in quotas["items"]] == ["q-ws-a"] and quotas["count"] == 2
    spaces = _top(costs, tokens["admin"], by="workspace")["items"]
    assert [(i["workspace"], i["cost_minor_precise"]) for i in spaces] == [
        ("ws-a", "241.2"), ("ws-b", "120")
    ]  # fmt: skip


def test_a_workspace_token_tops_its_own_workspaces_only(
    costs: TestClient, tokens: dict[str, str]
) -> None:
    mine = _top(costs, tokens["lead-a"], n=500)
    assert [i["job"] for i in mine["items"]] == ["t-big", "t-1", "t-2", "t-3"]
    assert (mine["count"], mine["total"]["cost_minor_precise"]) == (4, "241.2")
    assert mine["total"]["mgpu_seconds"] == 3_618_000
    theirs = _top(costs, tokens["lead-b"], by="workspace")
    assert [i["workspace"] for i in theirs["items"]] == ["ws-b"]
    assert theirs["total"]["cost_minor"] == 120
    for by in ("job", "user", "quota", "workspace"):
        rated = _top(costs, tokens["lead-b"], by=by, n=500, **HALF_HOUR)
        assert "ws-a" not in json.dumps(rated) and "t-big" not in json.dumps(rated), by
        assert rated["total"]["cost_minor"] == 104


def test_an_empty_store_tops_nothing(client: TestClient, tokens: dict[str, str]) -> None:
    # jobs and a price book, never billed: the ledger holds no cost yet
    body = _top(client, tokens["admin"])
    assert body["items"] == [] and body["count"] == 0
    assert body["total"] == {
        "mgpu_seconds": 14_400_000,
        "gpu_hours": "4",
        "cost_minor": 0,
        "cost_minor_precise": "0",
        "currency": "USD",
        "scale": 2,
        "cost_display": "0.00 USD",
    }


def test_the_top_as_csv(costs: TestClient, tokens: dict[str, str]) -> None:
    response = costs.get(
        TOP, params={"by": "workspace", "format": "csv"}, headers=bearer(tokens["admin"])
    )
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv")
    header, first, second = response.text.splitlines()
    assert header.split(",")[0] == "workspace" and first.startswith("ws-a,")
    assert second.startswith("ws-b,")


@pytest.mark.parametrize(
    ("params", "status", "says"),
    [
        ({"n": 0}, 422, "query.n"),
        ({"n": 10000}, 422, "query.n"),
        ({"n": 501}, 422, "query.n"),
        ({"n": "many"}, 422, "query.n"),
        ({"by": "nope"}, 422, "query.by"),
        ({"source": "guess"}, 422, "query.source"),
        ({"from": "2026-11-01"}, 422, "query.from"),
        # a window ending before it starts: the use case's refusal, as on /v1/cost
        ({"from": "2026-12-01T00:00:00Z", "to": "2026-11-01T00:00:00Z"}, 400, "after from"),
        ({"source": "ledger", **HALF_HOUR}, 400, "source rated"),
    ],
)
def test_bad_requests_are_problems(
    costs: TestClient, tokens: dict[str, str], params: dict[str, Any], status: int, says: str
) -> None:
    response = costs.get(TOP, params=params, headers=bearer(tokens["admin"]))
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    assert says in response.json()["detail"]


def test_the_ledger_top_is_ordered_and_cut_in_one_statement(store: PostgresEventStore) -> None:
    seed_costs(store)
    seen: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        seen.append((statement, params))

    event.listen(store.engine, "before_cursor_execute", record)
    try:
        with store.reading() as conn:
            top = cost_top(conn, "job", ReportWindow(), 2)
    finally:
        event.remove(store.engine, "before_cursor_execute", record)
    assert [r["job"] for r in top.rows] == ["t-big", "u-1"] and top.groups == 5
    assert top.total["cost_minor"] == TOTAL_MINOR
    (ordered,) = [(sql, p) for sql, p in seen if "ORDER BY cost DESC" in sql]
    assert "LIMIT %(n)s" in ordered[0] and ordered[1]["n"] == 2
