"""``POST /v1/subscriptions/{id}/nodes|changes|spec``: the changes of a subscription over
HTTP as ``dlc-ledger subscriptions add-nodes|change|change-spec`` make them, on
PostgreSQL: the amounts by hand, idempotent by key (200, nothing appended; 409 for another
request under it), the capacity of the resource groups before and after the instant, the
change history in ``GET /v1/subscriptions/{id}``, and the roles (writes admin, finance)."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi.testclient import TestClient

from ledger.store.postgres import PostgresEventStore
from tests.support.api import bearer

PROBLEM = "application/problem+json"
BUY = {
    "group": "gpu-g2",
    "spec": "ml.g2.8xlarge",
    "nodes": 2,
    "term": "month",
    "workspace": "ws-a",
    "at": "2027-01-10T00:00:00Z",
    "key": "order-1",
}


def _problem(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    detail = response.json()["detail"]
    assert isinstance(detail, str)
    return detail


def _buy(client: TestClient, headers: dict[str, str], **changes: Any) -> str:
    response = client.post("/v1/subscriptions", json={**BUY, **changes}, headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["subscription"]["subscription_id"])


def _nodes(client: TestClient, headers: dict[str, str], group: str, at: str) -> int:
    response = client.get(f"/v1/resource-groups/{group}", params={"at": at}, headers=headers)
    assert response.status_code == 200, response.text
    return int(response.json()["subscribed_nodes"])


def test_nodes_added_over_http(
    client: TestClient, tokens: dict[str, str], store: PostgresEventStore
) -> None:
    finance = bearer(tokens["finance"])
    sub = _buy(client, finance)
    url = f"/v1/subscriptions/{sub}/nodes"
    ask = {"nodes": 3, "key": "grow", "at": "2027-02-01T06:00:00Z"}
    head = store.head_position()
    dry = client.post(url, json={**ask, "dry_run": True}, headers=finance)
    assert dry.status_code == 200 and dry.json()["dry_run"] is True, dry.text
    assert store.head_position() == head
    response = client.post(url, json=ask, headers=finance)
    assert response.status_code == 201, response.text
    change = response.json()["change"]
    # 2027-02-01 06:00 -> 2027-02-10: 8.75 days = 9 started days of the term's 31;
    # 9,800.00 x 9 / 31 x 3 nodes = 8,535.483... -> 8,535.48
    assert (change["amount_minor"], change["amount_display"]) == (853_548, "8,535.48 USD")
    assert change["change"] == "add-nodes" and "9 of 31 day(s)" in change["detail"]
    assert dry.json()["change"] == change
    assert response.json()["subscription"]["nodes"] == 5
    assert response.json()["subscription"]["paid_minor"] == 1_960_000 + 853_548
    head = store.head_position()
    again = client.post(url, json=ask, headers=finance)
    assert again.status_code == 200 and again.json()["created"] is False, again.text
    assert store.head_position() == head
    assert "idempotency key 'grow'" in _problem(
        client.post(url, json={**ask, "nodes": 1}, headers=finance), 409
    )
    assert _nodes(client, finance, "gpu-g2", "2027-02-01T05:59:59Z") == 2
    assert _nodes(client, finance, "gpu-g2", "2027-02-01T06:00:00Z") == 5
    shown = client.get(f"/v1/subscriptions/{sub}", headers=finance).json()
    assert [c["change"] for c in shown["changes"]] == ["add-nodes"]
    assert shown["changes"][0] == change
    # roles: an auditor reads, it does not write
    auditor = bearer(tokens["auditor"])
    assert client.post(url, json={**ask, "key": "x"}, headers=auditor).status_code == 403
    # refused: a term already over, a bad count
    late = client.post(
        url, json={**ask, "key": "late", "at": "2027-03-01T00:00:00Z"}, headers=finance
    )
    assert "expired" in _problem(late, 409)
    assert client.post(url, json={**ask, "nodes": 0}, headers=finance).status_code == 422


def test_nodes_at_renewal_and_a_change_of_spec_over_http(
    client: TestClient, tokens: dict[str, str], store: PostgresEventStore
) -> None:
    admin = bearer(tokens["admin"])
    sub = _buy(client, admin, nodes=4, auto_renew=True)
    changed = client.post(
        f"/v1/subscriptions/{sub}/changes",
        json={"nodes": 1, "at": "2027-01-20T00:00:00Z", "key": "shrink"},
        headers=admin,
    )
    assert changed.status_code == 201, changed.text
    assert changed.json()["change"]["detail"] == "1 node(s) from term 2 (pending)"
    renewed = client.post(
        f"/v1/subscriptions/{sub}/renew", json={"at": "2027-02-01T00:00:00Z"}, headers=admin
    )
    assert renewed.status_code == 200, renewed.text
    # the renewal charges the new count: 1 x 9,800.00
    assert renewed.json()["term"]["amount_minor"] == 980_000
    assert renewed.json()["term"]["nodes"] == 1
    assert _nodes(client, admin, "gpu-g2", "2027-02-09T23:59:59Z") == 4
    assert _nodes(client, admin, "gpu-g2", "2027-02-10T00:00:00Z") == 1

    # change the spec on 2027-02-15 12:00, in term 2 (started 2027-02-10): 6 started days
    # x 9,800.00 / 30 x 1 node = 1,960.00 consumed of 9,800.00, refund 7,840.00; the new
    # 1 x ml.t4.2xlarge month costs 2,100.00
    url = f"/v1/subscriptions/{sub}/spec"
    ask = {
        "spec": "ml.t4.2xlarge",
        "group": "gpu-t4",
        "key": "to-t4",
        "at": "2027-02-15T12:00:00Z",
    }
    response = client.post(url, json=ask, headers=admin)
    assert response.status_code == 201, response.text
    done = response.json()
    new_id = done["new"]["subscription_id"]
    assert response.headers["location"] == f"/v1/subscriptions/{new_id}"
    assert done["cancellation"]["refund_minor"] == 784_000
    assert [(p["term"], p["refund_minor"]) for p in done["refund_terms"]] == [(2, 784_000)]
    assert (done["term"]["amount_minor"], done["new"]["nodes"]) == (210_000, 1)
    assert done["old"]["status"] == "cancelled" and done["new"]["status"] == "active"
    head = store.head_position()
    again = client.post(url, json=ask, headers=admin)
    assert again.status_code == 200 and again.json()["created"] is False, again.text
    assert again.json()["new"]["subscription_id"] == new_id
    assert store.head_position() == head
    assert "idempotency key 'to-t4'" in _problem(
        client.post(url, json={**ask, "nodes": 3}, headers=admin), 409
    )
    assert _nodes(client, admin, "gpu-g2", "2027-02-15T11:59:59Z") == 1
    assert _nodes(client, admin, "gpu-g2", "2027-02-15T12:00:00Z") == 0
    assert _nodes(client, admin, "gpu-t4", "2027-02-15T12:00:00Z") == 1
    shown = client.get(f"/v1/subscriptions/{sub}", headers=admin).json()
    assert [c["change"] for c in shown["changes"]] == ["nodes-at-renewal", "change-spec"]
    assert shown["changes"][0]["detail"] == "1 node(s) from term 2 (applied)"
    assert shown["changes"][1]["amount_minor"] == -784_000
    # the ledger: 4 x 9,800.00 + 1 x 9,800.00 - 7,840.00 + 2,100.00, balanced
    books = client.get("/v1/ledger/balance", headers=admin)
    assert books.status_code == 200, books.text
