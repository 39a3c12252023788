"""``/v1/month-to-date`` and ``/v1/budgets`` (issue 36): each workspace's month so far
with its forecast and budget, and the budgets as ``budgets show`` has them with the
crossings ``budgets check`` stored; both scoped to the token's workspaces."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dlc_ledger.api.app import create_app
from dlc_ledger.presenters import forecast_precise
from dlc_ledger.services.budgets import apply_budget_file, check
from ledger.store.postgres import PostgresEventStore
from tests.dlc_ledger.api.finance_data import seed_costs
from tests.support.api import bearer, without_freshness
from tests.support.builders import EPOCH
from tests.support.clis import CliCall

PROBLEM = "application/problem+json"
MID_NOVEMBER = "2026-11-15T00:00:00Z"
BUDGETS = """
budgets:
  - {workspace: ws-a, amount: "2.00", currency: USD, action: notify}
  - {workspace: ws-b, amount: 5, currency: USD, action: stop}
"""


@pytest.fixture
def budgeted(store: PostgresEventStore) -> Iterator[TestClient]:
    seed_costs(store)
    apply_budget_file(store, BUDGETS, principal="api/test", at=EPOCH)
    with TestClient(create_app(store), raise_server_exceptions=False) as client:
        yield client


def _get(client: TestClient, url: str, token: str, **params: Any) -> dict[str, Any]:
    response = client.get(url, params=params, headers=bearer(token))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = without_freshness(response.json())
    return body


def test_the_forecast_runs_the_month_so_far_on_to_its_end() -> None:
    start, end = datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC)
    one_day = datetime(2026, 11, 2, tzinfo=UTC)
    assert forecast_precise(10, start, one_day, end) == 300  # 10 a day for 30 days
    assert forecast_precise(7, start, datetime(2026, 11, 15, tzinfo=UTC), end) == Fraction(15)
    assert forecast_precise(10, start, start, end) == 10  # nothing elapsed: the cost


def test_month_to_date_per_workspace_with_its_forecast_and_budget(
    budgeted: TestClient, tokens: dict[str, str]
) -> None:
    body = _get(budgeted, "/v1/month-to-date", tokens["finance"], at=MID_NOVEMBER)
    assert body["at"] == MID_NOVEMBER and body["next_cursor"] is None
    a, b = body["items"]
    assert a == {
        "workspace": "ws-a",
        "month": "2026-11",
        "from": "2026-11-01T00:00:00Z",
        "as_of": MID_NOVEMBER,
        "cost_minor": 241,  # 241.2 cents, rounded once
        "cost_minor_precise": "241.2",
        "forecast_minor": 517,  # 241.2 x 30 days / 14 days = 516.86
        "currency": "USD",
        "scale": 2,
        "cost_display": "2.41 USD",
        "forecast_display": "5.17 USD",
        "budget": {
            "period": "2026-11",
            "action": "notify",
            "state": "exceeded",
            "exhausted": False,
            "limit_minor": 200,
            "spent_minor": 241,
            "left_minor": -41,
            "currency": "USD",
            "scale": 2,
            "limit_display": "2.00 USD",
            "spent_display": "2.41 USD",
            "left_display": "-0.41 USD",
        },
    }
    assert (b["workspace"], b["cost_minor"], b["forecast_minor"]) == ("ws-b", 120, 257)
    assert b["budget"]["state"] == "ok" and b["budget"]["left_display"] == "3.80 USD"


def test_month_to_date_defaults_to_the_latest_instant_with_data(
    budgeted: TestClient, tokens: dict[str, str]
) -> None:
    last = _get(budgeted, "/v1/extent", tokens["admin"])["last"]
    body = _get(budgeted, "/v1/month-to-date", tokens["admin"])
    assert body["at"] == last == "2026-11-01T01:03:00Z"
    a = body["items"][0]
    assert (a["as_of"], a["cost_minor"]) == (last, 241)
    # 241.2 cents in 63 minutes, run on over the 30 days of November
    assert a["forecast_minor"] == round(Fraction(2412, 10) * 30 * 24 * 60 / 63)
    # a later month: nothing spent yet, the budgets still in force
    december = _get(budgeted, "/v1/month-to-date", tokens["admin"], at="2026-12-10T00:00:00Z")
    rows = [(r["workspace"], r["month"], r["cost_minor"], r["forecast_minor"]) for r in
            december["items"]]  # fmt: skip
    assert rows == [("ws-a", "2026-12", 0, 0), ("ws-b", "2026-12", 0, 0)]


def test_month_to_date_is_scoped_to_the_tokens_workspaces(
    budgeted: TestClient, tokens: dict[str, str]
) -> None:
    mine = _get(budgeted, "/v1/month-to-date", tokens["lead-b"], at=MID_NOVEMBER)["items"]
    assert [r["workspace"] for r in mine] == ["ws-b"]
    assert "ws-a" not in json.dumps(mine)
    # a workspace of the token's with nothing spent and no budget still has its row
    both = _get(budgeted, "/v1/month-to-date", tokens["lead-ac"], at=MID_NOVEMBER)["items"]
    assert [(r["workspace"], r["cost_minor"], r["budget"]) for r in both][1:] == [("ws-c", 0, None)]
    assert both[1]["cost_display"] == "0.00 USD"


def test_an_empty_store_has_no_month_yet(store: PostgresEventStore, tokens: dict[str, str]) -> None:
    with TestClient(create_app(store)) as client:
        body = _get(client, "/v1/month-to-date", tokens["admin"])
        assert body == {"at": None, "items": [], "next_cursor": None}
        assert _get(client, "/v1/budgets", tokens["admin"])["items"] == []


def test_budgets_as_budgets_show_has_them_with_their_crossings(
    budgeted: TestClient, tokens: dict[str, str], store: PostgresEventStore, cli: CliCall
) -> None:
    before = _get(budgeted, "/v1/budgets", tokens["auditor"], at=MID_NOVEMBER)
    assert before["at"] == MID_NOVEMBER
    shown = json.loads(cli("budgets", "show", "--at", MID_NOVEMBER, "--format", "json"))
    assert [
        (r["workspace"], r["limit_minor"], r["spent_minor"], r["left_minor"], r["state"],
         r["exhausted"], r["action"], r["period"]) for r in before["items"]
    ] == [
        (r["workspace"], r["budget_minor"], r["spent_minor"], r["remaining_minor"], r["state"],
         r["exhausted"], r["action"], r["period"]) for r in shown
    ]  # fmt: skip
    a = before["items"][0]
    assert (a["workspace"], a["state"], a["thresholds_crossed"]) == ("ws-a", "exceeded", [])
    assert (a["since"], a["limit_display"], a["spent_display"]) == (
        "2026-11-01T00:00:00Z", "2.00 USD", "2.41 USD"
    )  # fmt: skip
    (breach,) = check(store, datetime(2026, 11, 15, tzinfo=UTC), source="test")
    after = _get(budgeted, "/v1/budgets", tokens["auditor"], at=MID_NOVEMBER)["items"]
    assert after[0]["thresholds_crossed"] == [
        {
            "at": breach.at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "action": "notify",
            "limit_minor": 200,
            "spent_minor": breach.spent_minor,
            "currency": "USD",
            "scale": 2,
            "limit_display": "2.00 USD",
            "spent_display": f"{breach.spent_minor / 100:.2f} USD",
        }
    ]
    assert after[1]["thresholds_crossed"] == []
    # a crossing after the instant asked about is not shown
    earlier = _get(budgeted, "/v1/budgets", tokens["admin"], at="2026-11-01T00:00:30Z")
    assert earlier["items"][0]["thresholds_crossed"] == []


def test_budgets_are_scoped_to_the_tokens_workspaces(
    budgeted: TestClient, tokens: dict[str, str]
) -> None:
    mine = _get(budgeted, "/v1/budgets", tokens["lead-b"], at=MID_NOVEMBER)["items"]
    assert [r["workspace"] for r in mine] == ["ws-b"] and "ws-a" not in json.dumps(mine)
    as_csv = budgeted.get(
        "/v1/budgets",
        params={"at": MID_NOVEMBER, "format": "csv"},
        headers=bearer(tokens["lead-a"]),
    )
    assert as_csv.status_code == 200 and "ws-b" not in as_csv.text and "ws-a" in as_csv.text


@pytest.mark.parametrize("url", ["/v1/month-to-date", "/v1/budgets"])
@pytest.mark.parametrize(
    ("params", "status"),
    [
        ({"at": "2026-11-15"}, 422),
        ({"at": "1700000000"}, 422),
        ({"limit": 0}, 422),
        ({"limit": 1001}, 422),
        ({"cursor": "nonsense"}, 400),
    ],
)
def test_bad_requests_are_problems(
    budgeted: TestClient, tokens: dict[str, str], url: str, params: dict[str, Any], status: int
) -> None:
    response = budgeted.get(url, params=params, headers=bearer(tokens["admin"]))
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
