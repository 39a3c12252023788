"""``/v1/subscriptions`` and ``/v1/resource-groups``: purchase, renew and cancel over HTTP
as ``dlc-ledger subscriptions`` does them, money with currency, scale and display, the
refund in the cancellation's answer, reads at the head after a write, and the roles (reads
admin, finance, auditor; writes admin, finance; a workspace token nothing)."""

from __future__ import annotations

import json
from typing import Any

import httpx
from fastapi.testclient import TestClient

from ledger.store.postgres import PostgresEventStore
from tests.support.api import bearer, same_as_cli, without_freshness
from tests.support.clis import CliCall

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
    assert response.json()["status"] == status
    detail = response.json()["detail"]
    assert isinstance(detail, str)
    return detail


def _buy(client: TestClient, token: str, **changes: Any) -> dict[str, Any]:
    response = client.post("/v1/subscriptions", json={**BUY, **changes}, headers=bearer(token))
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def test_purchase_then_list_and_show(
    client: TestClient, tokens: dict[str, str], store: PostgresEventStore, cli: CliCall
) -> None:
    finance = bearer(tokens["finance"])
    response = client.post("/v1/subscriptions", json=BUY, headers=finance)
    assert response.status_code == 201, response.text
    order = response.json()
    sub = order["subscription"]
    sub_id = sub["subscription_id"]
    assert response.headers["location"] == f"/v1/subscriptions/{sub_id}"
    assert (order["created"], order["dry_run"]) == (True, False)
    assert sub["status"] == "active" and sub["group"] == "gpu-g2" and sub["nodes"] == 2
    # 2 nodes x 9,800.00 a month, billed in full at the order
    assert (sub["paid_minor"], sub["currency"], sub["scale"]) == (1_960_000, "USD", 2)
    assert (sub["paid_display"], sub["refunded_display"]) == ("19,600.00 USD", "0.00 USD")
    assert sub["unit_price"] == "9800"  # per node, in the currency
    term = order["term"]
    assert (term["term"], term["unit"], term["amount_minor"]) == (1, "month", 1_960_000)
    assert (term["starts_at"], term["ends_at"]) == ("2027-01-10T00:00:00Z", "2027-02-10T00:00:00Z")
    assert term["amount_display"] == "19,600.00 USD"
    # the write brought the read models to the head, and says where that is
    head = store.head_position()
    assert response.headers["Ledger-Head-Position"] == str(head)
    assert response.headers["Ledger-Behind"] == "0"
    assert order["freshness"] == {"head": head, "projected": head, "behind": 0}
    # the event names the caller
    events = client.get(f"/v1/streams/subscription/{sub_id}/events", headers=finance).json()
    (purchased,) = events["items"]
    assert purchased["type"] == "SubscriptionPurchased"
    assert purchased["source"].startswith("api/finance(tok_") and purchased["source"][-1] == ")"

    # the same key again: the same subscription, 200, nothing appended
    again = client.post("/v1/subscriptions", json=BUY, headers=finance)
    assert again.status_code == 200, again.text
    assert again.json()["subscription"] == sub and again.json()["created"] is False
    assert "location" not in again.headers
    assert store.head_position() == head
    # without a key an identical purchase is refused rather than doubled
    unkeyed = {**BUY, "key": None}
    assert client.post("/v1/subscriptions", json=unkeyed, headers=finance).status_code == 201
    assert "identical purchase" in _problem(
        client.post("/v1/subscriptions", json=unkeyed, headers=finance), 409
    )
    # a dry run answers 200 and appends nothing
    head = store.head_position()
    dry = client.post(
        "/v1/subscriptions", json={**BUY, "key": "order-2", "dry_run": True}, headers=finance
    )
    assert dry.status_code == 200, dry.text
    assert (dry.json()["created"], dry.json()["dry_run"]) == (False, True)
    assert store.head_position() == head

    for role in ("admin", "finance", "auditor"):
        listed = client.get(
            "/v1/subscriptions", params={"at": "2027-01-15T00:00:00Z"}, headers=bearer(tokens[role])
        )
        assert listed.status_code == 200, (role, listed.text)
        body = without_freshness(listed.json())
        assert body["at"] == "2027-01-15T00:00:00Z" and body["next_cursor"] is None
        items: list[dict[str, Any]] = listed.json()["items"]
        ids = [i["subscription_id"] for i in items]
        assert sub in items and len(ids) == 2 and ids == sorted(ids)  # the same start: by id
    cli_rows = json.loads(
        cli("subscriptions", "list", "--at", "2027-01-15T00:00:00Z", "--format", "json")
    )
    assert same_as_cli(items, cli_rows)
    paged = client.get("/v1/subscriptions?limit=1&format=csv", headers=finance)
    assert paged.status_code == 200 and paged.headers["content-type"].startswith("text/csv")
    assert items[0]["subscription_id"] in paged.text and 'rel="next"' in paged.headers["link"]

    shown = client.get(
        f"/v1/subscriptions/{sub_id}",
        params={"at": "2027-03-01T00:00:00Z"},
        headers=bearer(tokens["auditor"]),
    )
    assert shown.status_code == 200, shown.text
    detail = shown.json()
    assert detail["subscription"]["status"] == "expired"  # a month, not renewed
    assert detail["at"] == "2027-03-01T00:00:00Z" and detail["cancellation"] is None
    # the order's term, with its SLA credit (the demo book states no commitment)
    no_sla = {"sla": "none", "undelivered_node_hours": "0.00", "sla_credit_minor": None}
    assert detail["terms"] == [term | no_sla]
    assert detail["freshness"]["behind"] == 0

    groups = client.get(
        "/v1/resource-groups", params={"at": "2027-01-15T00:00:00Z"}, headers=finance
    )
    assert groups.status_code == 200, groups.text
    (group,) = groups.json()["items"]
    assert group["group"] == "gpu-g2" and group["spec"] == "ml.g2.8xlarge"
    assert (group["subscribed_nodes"], group["delivered_nodes"]) == (4, 0)
    assert group["capacity"]["gpu/G2"] == 4 * 8 * 1000  # 4 nodes x 8 GPUs, in mGPU
    assert sub_id in group["subscriptions"] and len(group["subscriptions"]) == 2
    one = client.get(
        "/v1/resource-groups/gpu-g2", params={"at": "2027-01-15T00:00:00Z"}, headers=finance
    )
    assert one.status_code == 200, one.text
    assert {k: v for k, v in one.json().items() if k not in ("at", "freshness")} == group
    assert one.json()["at"] == "2027-01-15T00:00:00Z"


def test_renewal_once_then_a_conflict(client: TestClient, tokens: dict[str, str]) -> None:
    admin = bearer(tokens["admin"])
    sub_id = _buy(client, tokens["admin"])["subscription"]["subscription_id"]
    url = f"/v1/subscriptions/{sub_id}/renew"
    dry = client.post(url, json={"at": "2027-02-01T00:00:00Z", "dry_run": True}, headers=admin)
    assert dry.status_code == 200, dry.text
    assert dry.json()["dry_run"] is True and dry.json()["term"]["term"] == 2
    renewed = client.post(url, json={"at": "2027-02-01T00:00:00Z"}, headers=admin)
    assert renewed.status_code == 200, renewed.text
    order = renewed.json()
    assert (order["created"], order["dry_run"]) == (True, False)
    term = order["term"]
    assert (term["term"], term["starts_at"]) == (2, "2027-02-10T00:00:00Z")
    assert (term["amount_minor"], term["amount_display"]) == (1_960_000, "19,600.00 USD")
    assert order["subscription"]["paid_minor"] == 2 * 1_960_000
    assert order["subscription"]["ends_at"] == "2027-03-10T00:00:00Z"
    # the next term is ordered and has not started: a second renewal is refused
    detail = _problem(client.post(url, json={"at": "2027-02-02T00:00:00Z"}, headers=admin), 409)
    assert "already renewed" in detail
    # once it has ended there is nothing to renew
    late = client.post(url, json={"at": "2027-04-01T00:00:00Z"}, headers=admin)
    assert "expired" in _problem(late, 409)
    shown = client.get(f"/v1/subscriptions/{sub_id}", headers=admin).json()
    assert [t["term"] for t in shown["terms"]] == [1, 2]


def test_cancel_immediately_answers_the_refund(
    client: TestClient, tokens: dict[str, str], store: PostgresEventStore
) -> None:
    finance = bearer(tokens["finance"])
    sub_id = _buy(client, tokens["finance"], term="year", nodes=1)["subscription"][
        "subscription_id"
    ]
    url = f"/v1/subscriptions/{sub_id}/cancel"
    ask = {"immediately": True, "at": "2027-03-01T12:00:00Z", "reason": "moving out"}
    head = store.head_position()
    dry = client.post(url, json={**ask, "dry_run": True}, headers=finance)
    assert dry.status_code == 200, dry.text
    assert store.head_position() == head
    response = client.post(url, json=ask, headers=finance)
    assert response.status_code == 200, response.text
    done = response.json()
    assert dry.json()["cancellation"] == done["cancellation"] and dry.json()["dry_run"] is True
    # 51 days used (each started day counts) x 9,800.00 / 30 = 16,660.00 consumed
    (part,) = done["refund_terms"]
    assert (part["term"], part["paid_minor"]) == (1, 9_800_000)
    assert (part["consumed_minor"], part["refund_minor"]) == (1_666_000, 8_134_000)
    assert (part["consumed_display"], part["refund_display"]) == (
        "16,660.00 USD",
        "81,340.00 USD",
    )
    assert (part["currency"], part["scale"]) == ("USD", 2) and "51 day(s)" in part["why"]
    cancellation = done["cancellation"]
    assert cancellation["mode"] == "immediately" and cancellation["no_reason"] is False
    assert cancellation["effective_at"] == "2027-03-01T12:00:00Z"
    assert cancellation["reason"] == "moving out" and cancellation["rule"].startswith("term 1:")
    assert (cancellation["refund_minor"], cancellation["refund_display"]) == (
        8_134_000,
        "81,340.00 USD",
    )
    sub = done["subscription"]
    assert (sub["refunded_minor"], sub["refunded_display"]) == (8_134_000, "81,340.00 USD")
    assert response.headers["Ledger-Behind"] == "0"
    # the detail shows it cancelled, and a second cancel is refused
    shown = client.get(
        f"/v1/subscriptions/{sub_id}?at=2027-03-02T00:00:00Z", headers=bearer(tokens["auditor"])
    ).json()
    assert shown["subscription"]["status"] == "cancelled"
    assert shown["cancellation"] == cancellation
    assert "already cancelled" in _problem(client.post(url, json=ask, headers=finance), 409)


def test_cancel_at_the_term_end_refunds_nothing(client: TestClient, tokens: dict[str, str]) -> None:
    admin = bearer(tokens["admin"])
    sub_id = _buy(client, tokens["admin"])["subscription"]["subscription_id"]
    response = client.post(
        f"/v1/subscriptions/{sub_id}/cancel", json={"at": "2027-01-20T00:00:00Z"}, headers=admin
    )
    assert response.status_code == 200, response.text
    done = response.json()
    assert done["cancellation"]["mode"] == "end-of-term"
    assert done["cancellation"]["effective_at"] == "2027-02-10T00:00:00Z"
    assert done["cancellation"]["refund_minor"] == 0 and done["refund_terms"] == []
    assert done["subscription"]["status"] == "cancelling"


def test_a_workspace_token_and_the_auditor_may_not(
    client: TestClient, tokens: dict[str, str], store: PostgresEventStore
) -> None:
    sub_id = _buy(client, tokens["admin"])["subscription"]["subscription_id"]
    head = store.head_position()
    reads = [
        "/v1/subscriptions",
        f"/v1/subscriptions/{sub_id}",
        "/v1/resource-groups",
        "/v1/resource-groups/gpu-g2",
    ]
    writes = [
        ("/v1/subscriptions", {**BUY, "key": "order-9"}),
        (f"/v1/subscriptions/{sub_id}/renew", {"at": "2027-02-01T00:00:00Z"}),
        (f"/v1/subscriptions/{sub_id}/cancel", {"immediately": True}),
    ]
    for role in ("lead-a", "lead-ac", "lead-b"):  # even the paying workspace's own lead
        headers = bearer(tokens[role])
        for url in reads:
            assert "needs the role" in _problem(client.get(url, headers=headers), 403)
        for url, body in writes:
            assert "needs the role" in _problem(client.post(url, json=body, headers=headers), 403)
    for url, body in writes:
        response = client.post(url, json=body, headers=bearer(tokens["auditor"]))
        assert _problem(response, 403) == "this route needs the role admin or finance"
        assert client.post(url, json=body).status_code == 401
    assert store.head_position() == head  # nothing was written


def test_unknown_ids_are_404(client: TestClient, tokens: dict[str, str]) -> None:
    admin = bearer(tokens["admin"])
    assert "sub-nope" in _problem(client.get("/v1/subscriptions/sub-nope", headers=admin), 404)
    for action in ("renew", "cancel"):
        response = client.post(f"/v1/subscriptions/sub-nope/{action}", json={}, headers=admin)
        assert "no subscription 'sub-nope'" in _problem(response, 404)
    assert "no resource group 'nope'" in _problem(
        client.get("/v1/resource-groups/nope", headers=admin), 404
    )
    unknown_spec = client.post("/v1/subscriptions", json={**BUY, "spec": "ml.nope"}, headers=admin)
    assert "ml.nope" in _problem(unknown_spec, 404)


def test_bad_requests_are_400_or_422(client: TestClient, tokens: dict[str, str]) -> None:
    admin = bearer(tokens["admin"])

    def buy(**changes: Any) -> httpx.Response:
        response: httpx.Response = client.post(
            "/v1/subscriptions", json={**BUY, **changes}, headers=admin
        )
        return response

    assert _problem(buy(term="week"), 422).startswith("body.term:")
    assert _problem(buy(nodes=0), 422).startswith("body.nodes:")
    assert "time zone" in _problem(buy(at="2027-01-10T00:00:00"), 422)
    assert "body.colour" in _problem(buy(colour="red"), 422)  # a misspelt field is no default
    assert "body.group" in _problem(buy(group="g\x00"), 422)
    missing = client.post("/v1/subscriptions", json={"group": "gpu-g2"}, headers=admin)
    assert "body.spec" in _problem(missing, 422)
    assert "must not be empty" in _problem(buy(key="   "), 422)  # checked where it enters
    _buy(client, tokens["admin"])
    other = buy(spec="ml.t4.2xlarge", key="order-t4")  # a group holds one spec
    assert "holds nodes of spec" in _problem(other, 409)
    assert client.get("/v1/subscriptions", params={"at": "0"}, headers=admin).status_code == 422


def test_utilisation_matches_the_cli(
    client: TestClient, tokens: dict[str, str], cli: CliCall
) -> None:
    _buy(client, tokens["finance"])
    window = {"from": "2027-01-10T00:00:00Z", "to": "2027-01-11T00:00:00Z"}
    response = client.get(
        "/v1/subscription-utilisation", params=window, headers=bearer(tokens["auditor"])
    )
    assert response.status_code == 200, response.text
    (row,) = response.json()["items"]
    assert row["subscribed_gpu_hours"] == "384.00" and row["used_gpu_hours"] == "0.00"
    assert row["currency"] == "USD" and row["cost_display"].endswith(" USD")
    (printed,) = json.loads(
        cli("report", "subscriptions", "--format", "json", "--from", window["from"],
            "--to", window["to"])
    )  # fmt: skip
    assert printed["cost_minor"] == row["cost_minor"] and printed["group"] == row["group"]
    denied = client.get("/v1/subscription-utilisation", headers=bearer(tokens["lead-a"]))
    assert denied.status_code == 403
