"""``/v1/ledger/periods`` and ``POST /v1/ledger/periods/{period}/close`` (issue 47, period
locks over HTTP): a close through the API locks the month for every workspace (a back-dated
purchase after it is booked into the open month), issues its invoices at once, a repeat is
idempotent, a dry run appends nothing and names what the close then does; the list is
``billing periods --format json``'s rows; bad input is a problem document; the roles."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import httpx
from fastapi.testclient import TestClient

from ledger.store.postgres import PostgresEventStore
from tests.support.api import bearer, same_as_cli, without_freshness
from tests.support.billing import query
from tests.support.clis import CliCall

PROBLEM = "application/problem+json"
CLOSE = "/v1/ledger/periods/2027-01/close"
AT = "2027-02-01T00:00:00Z"  # January's end


def _buy(client: TestClient, token: str, workspace: str, when: str, key: str) -> None:
    order = {
        "group": "gpu-g2", "spec": "ml.g2.8xlarge", "nodes": 1, "term": "month",
        "workspace": workspace, "allow_unknown_workspace": True, "at": when, "key": key,
    }  # fmt: skip
    response = client.post("/v1/subscriptions", json=order, headers=bearer(token))
    assert response.status_code == 201, response.text


def _problem(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    detail = response.json()["detail"]
    assert isinstance(detail, str)
    return detail


def _periods(client: TestClient, token: str) -> dict[str, dict[str, Any]]:
    response = client.get("/v1/ledger/periods", headers=bearer(token))
    assert response.status_code == 200, response.text
    return {row["period"]: row for row in response.json()["items"]}


def test_a_close_through_the_api_locks_the_month(
    client: TestClient, tokens: dict[str, str], store: PostgresEventStore, cli: CliCall
) -> None:
    finance = bearer(tokens["finance"])
    _buy(client, tokens["finance"], "ws-a", "2027-01-05T00:00:00Z", "jan-a")
    # rate and invoice what was due by then, so the dry run's view is the close's
    cli("billing", "run", "--until", AT, "--force")
    assert _periods(client, tokens["finance"])["2027-01"]["status"] == "open"

    # a dry run: 200, the same checks, nothing appended, what it would lock and issue
    head = store.head_position()
    dry = client.post(CLOSE, json={"at": AT, "force": True, "dry_run": True}, headers=finance)
    assert dry.status_code == 200, dry.text
    preview: dict[str, Any] = without_freshness(dry.json())
    assert preview["dry_run"] is True and preview["closed"] is True
    assert (preview["period"], preview["at"], preview["workspaces"]) == ("2027-01", AT, ["ws-a"])
    (due,) = preview["invoices"]
    assert (due["workspace"], due["period"]) == ("ws-a", "2027-01")
    assert store.head_position() == head

    # the close: 201, January locked, its invoice issued at once (grace waived): the one
    # the dry run named
    body = {"at": AT, "force": True, "reason": "month-end"}
    response = client.post(CLOSE, json=body, headers=finance)
    assert response.status_code == 201, response.text
    assert response.headers["location"] == "/v1/ledger/periods"
    done = without_freshness(response.json())
    assert {**done, "dry_run": True} == preview
    assert response.json()["freshness"]["behind"] == 0
    (issued,) = query(store, "SELECT invoice_id FROM billing_invoices WHERE period = '2027-01'")
    assert issued.invoice_id == due["invoice_id"]

    # a repeat: 200, nothing closed nor issued again
    head = store.head_position()
    again = client.post(CLOSE, json=body, headers=finance)
    assert again.status_code == 200, again.text
    assert (again.json()["closed"], again.json()["invoices"]) == (False, [])
    assert again.json()["dry_run"] is False
    closes = "SELECT count(*) FROM events WHERE type = 'PeriodClosed' AND data->>'period' = :p"
    assert query(store, closes, p="2027-01") == [(1,)]
    assert query(store, "SELECT count(*) FROM billing_invoices WHERE period = '2027-01'") == [(1,)]
    # a repeat's dry run says it is locked already
    dry_again = client.post(CLOSE, json={**body, "dry_run": True}, headers=finance).json()
    assert (dry_again["closed"], dry_again["invoices"]) == (False, [])
    assert store.head_position() == head

    # the list: January locked, who closed it and why; the CLI's rows, as JSON and CSV
    periods = _periods(client, tokens["auditor"])
    january = periods["2027-01"]
    assert (january["status"], january["reason"], january["invoices"]) == ("locked", "month-end", 1)
    assert january["closed_by"].startswith("api/finance(tok_")
    assert january["closed_at"] == AT
    listed = client.get("/v1/ledger/periods", headers=finance).json()["items"]
    assert same_as_cli(listed, json.loads(cli("billing", "periods", "--format", "json")))
    as_csv = client.get("/v1/ledger/periods?format=csv", headers=finance)
    assert as_csv.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(as_csv.text)))
    assert [r["period"] for r in rows] == [r["period"] for r in listed]
    assert {r["period"]: r["status"] for r in rows}["2027-01"] == "locked"

    # a back-dated purchase into January, after the close: booked into February, as an
    # adjustment naming its January dates; January's invoice unchanged
    _buy(client, tokens["finance"], "ws-b", "2027-01-25T00:00:00Z", "jan-b")
    (charge,) = query(
        store,
        "SELECT period, memo, data->>'service_period' AS service FROM billing_transactions "
        "WHERE workspace = 'ws-b' AND data->'charge' IS NOT NULL",
    )
    assert (charge.period, charge.service) == ("2027-02", "2027-01")
    assert "late adjustment for locked period 2027-01" in charge.memo
    assert query(store, "SELECT count(*) FROM billing_invoices WHERE period = '2027-01'") == [(1,)]


def test_bad_input_is_a_problem_and_appends_nothing(
    client: TestClient, tokens: dict[str, str], store: PostgresEventStore
) -> None:
    finance = bearer(tokens["finance"])
    head = store.head_position()
    for period in ("2027-13", "2027-1", "27-01", "2027-00", "january"):
        response = client.post(f"/v1/ledger/periods/{period}/close", headers=finance)
        assert "period" in _problem(response, 422), period
    # a month that has not ended by the instant: refused before the billing tick
    early = client.post(
        "/v1/ledger/periods/2027-02/close", json={"at": AT, "force": True}, headers=finance
    )
    assert "a period is closed once it has ended" in _problem(early, 400)
    dry = {"at": AT, "force": True, "dry_run": True}
    early_dry = client.post("/v1/ledger/periods/2027-02/close", json=dry, headers=finance)
    assert "a period is closed once it has ended" in _problem(early_dry, 400)
    # an instant beyond the cluster clock, without force: as billing run's --until
    ahead = client.post(CLOSE, json={"at": "2199-01-01T00:00:00Z"}, headers=finance)
    assert "--force" in _problem(ahead, 409)
    for wrong in (
        {"at": "1700000000"},  # not an ISO instant
        {"at": "2027-02-01T00:00:00"},  # no zone
        {"force": "yes"},
        {"dry_run": 1},
        {"reason": "x" * 100_000},
        {"unknown": True},
    ):
        response = client.post(CLOSE, json=wrong, headers=finance)
        assert response.status_code in (400, 422), (wrong, response.text)
        assert response.headers["content-type"] == PROBLEM
    assert store.head_position() == head


def test_the_roles(client: TestClient, tokens: dict[str, str], store: PostgresEventStore) -> None:
    head = store.head_position()
    dry = {"at": AT, "force": True, "dry_run": True}
    for role in ("lead-a", "auditor"):
        response = client.post(CLOSE, json=dry, headers=bearer(tokens[role]))
        _problem(response, 403)
        real = client.post(CLOSE, json={"at": AT, "force": True}, headers=bearer(tokens[role]))
        _problem(real, 403)
    _problem(client.get("/v1/ledger/periods", headers=bearer(tokens["lead-a"])), 403)
    for role in ("admin", "finance"):
        assert client.post(CLOSE, json=dry, headers=bearer(tokens[role])).status_code == 200
    for role in ("admin", "finance", "auditor"):
        assert client.get("/v1/ledger/periods", headers=bearer(tokens[role])).status_code == 200
    assert store.head_position() == head
