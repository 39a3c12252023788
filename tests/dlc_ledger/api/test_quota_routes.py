"""``/v1/quotas/tree``, ``/v1/quotas/{quota}/series`` and ``/v1/queues/{quota}``: the same
figures as ``quotas tree``, ``report quota-series`` and ``queue show``, narrowed to a
workspace token's quota subtree inside the SQL."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from dlc_ledger.services.dispatch import queue_page
from ledger.store.postgres import PostgresEventStore
from tests.support.api import bearer, same_as_cli
from tests.support.clis import CliCall

WINDOW = {"from": "2026-11-01T00:00:00Z", "to": "2026-12-01T00:00:00Z"}


def _tree(client: TestClient, token: str, **params: str) -> dict[str, Any]:
    response = client.get("/v1/quotas/tree", params=params, headers=bearer(token))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_the_tree_has_the_clis_figures_at_every_node(
    dispatched: TestClient, tokens: dict[str, str], cli: CliCall
) -> None:
    body = _tree(dispatched, tokens["finance"], limit="1000", **WINDOW)
    items = body["items"]
    assert isinstance(items, list) and body["next_cursor"] is None
    expected = json.loads(
        cli("quotas", "tree", "--from", WINDOW["from"], "--to", WINDOW["to"], "--format", "json")
    )
    assert [(i["quota"], i["flavor"]) for i in items] == [
        (r["quota"], r["flavor"]) for r in expected
    ]
    assert same_as_cli(items, expected)
    assert body["at"] == expected[0]["at"]
    # parents before children, inner nodes included; money as minor units + display
    quotas = list(dict.fromkeys(i["quota"] for i in items))
    assert quotas == ["root", "q-ws-a", "q-ws-b", "team-c", "q-ws-c"]
    rows = {(i["quota"], i["flavor"]): i for i in items}
    a_gpu = rows[("q-ws-a", "gpu/any")]
    assert (a_gpu["min"], a_gpu["max"], a_gpu["parent"], a_gpu["unit"]) == (
        2000, 4000, "root", "mGPU"
    )  # fmt: skip
    assert (a_gpu["mgpu_seconds"], a_gpu["gpu_hours"]) == (2 * 3600 * 1000, "2")
    assert (a_gpu["cost_minor"], a_gpu["currency"], a_gpu["scale"]) == (480, "USD", 2)
    assert a_gpu["cost_display"] == "4.80 USD"
    # a pending job asks 5 GPUs of a max of 4: queued demand, a pending job
    assert (a_gpu["queued"] >= 5000, a_gpu["pending_jobs"] >= 1) == (True, True)
    root = rows[("root", "gpu/any")]
    assert root["cost_minor"] == 4 * 240 and root["mgpu_seconds"] == 4 * 3600 * 1000
    # used, split by kind at every node: all training here, and the parts add up
    for item in items:
        parts = (item["used_training"], item["used_service"], item["used_notebook"])
        assert sum(parts) == item["used"] and parts[1:] == (0, 0), item


def test_a_workspace_token_sees_its_subtree_only(
    dispatched: TestClient, tokens: dict[str, str]
) -> None:
    def quotas(role: str) -> list[str]:
        items = _tree(dispatched, tokens[role], **WINDOW)["items"]
        assert isinstance(items, list)
        return list(dict.fromkeys(i["quota"] for i in items))

    assert quotas("lead-a") == ["q-ws-a"]
    assert quotas("lead-b") == ["q-ws-b"]
    # ws-c's leaf is all of team-c: the branch's node is the lead's too; root is shared
    assert quotas("lead-ac") == ["q-ws-a", "team-c", "q-ws-c"]
    # the figures are the whole tree's (lending depends on the nodes around)
    mine = _tree(dispatched, tokens["lead-a"], **WINDOW)["items"]
    everyone = _tree(dispatched, tokens["admin"], limit="1000", **WINDOW)["items"]
    assert isinstance(mine, list) and isinstance(everyone, list)
    assert mine == [i for i in everyone if i["quota"] == "q-ws-a"]


def test_a_series_per_step_as_the_cli_charts_it(
    dispatched: TestClient, tokens: dict[str, str], cli: CliCall
) -> None:
    window = {"from": "2026-11-01T00:00:00Z", "to": "2026-11-01T05:00:00Z"}
    response = dispatched.get(
        "/v1/quotas/q-ws-b/series",
        params={**window, "step": "hour", "limit": 1000},
        headers=bearer(tokens["lead-b"]),
    )
    assert response.status_code == 200, response.text
    items = response.json()["items"]
    expected = json.loads(
        cli("report", "quota-series", "q-ws-b", "--from", window["from"], "--to",
            window["to"], "--step", "hour", "--format", "json")
    )  # fmt: skip
    assert items == expected and len(items) == 6 * 3  # 6 hours x cpu, gpu/any, memory
    gpu = [i for i in items if i["flavor"] == "gpu/any"]
    assert [i["at"] for i in gpu][:2] == ["2026-11-01T00:00:00Z", "2026-11-01T01:00:00Z"]
    # b-1 ran its GPU from 2 h to 3 h
    assert [i["used"] for i in gpu] == [0, 0, 1000, 0, 0, 0]
    assert {"min", "max", "borrowed", "lent", "queued", "pending_jobs", "running_jobs"} <= set(
        gpu[0]
    )
    first = dispatched.get(
        "/v1/quotas/q-ws-b/series",
        params={**window, "limit": 4},
        headers=bearer(tokens["admin"]),
    ).json()
    assert first["items"] == items[:4] and first["next_cursor"]


def test_series_outside_the_subtree_or_unknown_is_404(
    dispatched: TestClient, tokens: dict[str, str]
) -> None:
    for role, quota in (("lead-a", "q-ws-b"), ("lead-a", "root"), ("lead-a", "team-c"),
                        ("admin", "nowhere"), ("lead-a", "nowhere")):  # fmt: skip
        response = dispatched.get(f"/v1/quotas/{quota}/series", headers=bearer(tokens[role]))
        assert response.status_code == 404, (role, quota, response.text)
        assert response.json()["detail"] == f"no quota {quota!r}"
    ok = dispatched.get("/v1/quotas/team-c/series", headers=bearer(tokens["lead-ac"]))
    assert ok.status_code == 200 and {i["quota"] for i in ok.json()["items"]} == {"team-c"}
    bad = dispatched.get(
        "/v1/quotas/root/series", params={"step": "week"}, headers=bearer(tokens["admin"])
    )
    assert bad.status_code == 422


def test_the_queue_in_dispatch_order(
    dispatched: TestClient, tokens: dict[str, str], store: PostgresEventStore
) -> None:
    response = dispatched.get("/v1/queues/root", headers=bearer(tokens["admin"]))
    assert response.status_code == 200, response.text
    body = response.json()
    page = queue_page(store, "root")
    assert [i["job_uid"] for i in body["items"]] == [r["job_uid"] for r in page.rows]
    assert [i["job_uid"] for i in body["items"]] == ["a-9", "b-9"]
    a9 = body["items"][0]
    assert (a9["workspace"], a9["quota"], a9["position"], a9["reason"]) == (
        "ws-a", "q-ws-a", 1, "ExceedsMaxQuota"
    )  # fmt: skip
    assert a9["request"] == {"gpu/any": 5000} and body["now"] == "2026-11-01T04:00:00Z"
    paged = dispatched.get("/v1/queues/root?limit=1", headers=bearer(tokens["admin"])).json()
    rest = dispatched.get(
        "/v1/queues/root",
        params={"limit": 1, "cursor": paged["next_cursor"]},
        headers=bearer(tokens["admin"]),
    ).json()
    assert [i["job_uid"] for i in paged["items"] + rest["items"]] == ["a-9", "b-9"]
    assert rest["next_cursor"] is None
    mine = dispatched.get("/v1/queues/q-ws-a", headers=bearer(tokens["lead-a"])).json()
    assert [i["job_uid"] for i in mine["items"]] == ["a-9"]
    for role, quota in (("lead-a", "root"), ("lead-a", "q-ws-b"), ("admin", "nowhere")):
        hidden = dispatched.get(f"/v1/queues/{quota}", headers=bearer(tokens[role]))
        assert hidden.status_code == 404, (role, quota)


def test_the_queue_at_an_instant(
    dispatched: TestClient, tokens: dict[str, str], cli: CliCall
) -> None:
    # a-9 and b-9 were submitted at 4 h: at 2:30 nothing waited, at 4 h both did
    def queue(then: str) -> list[str]:
        response = dispatched.get(
            "/v1/queues/root", params={"at": then}, headers=bearer(tokens["admin"])
        )
        assert response.status_code == 200, response.text
        assert response.json()["now"] == then
        expected = json.loads(cli("queue", "show", "root", "--at", then, "--format", "json"))
        items: list[dict[str, Any]] = response.json()["items"]
        assert same_as_cli(items, expected)
        return [i["job_uid"] for i in items]

    assert queue("2026-11-01T02:30:00Z") == []
    assert queue("2026-11-01T04:00:00Z") == ["a-9", "b-9"]


def test_the_tree_at_an_instant(
    dispatched: TestClient, tokens: dict[str, str], cli: CliCall
) -> None:
    then = "2026-11-01T02:30:00Z"
    body = _tree(dispatched, tokens["auditor"], at=then, limit="1000")
    assert body["at"] == then
    expected = json.loads(cli("quotas", "tree", "--at", then, "--format", "json"))
    assert body["items"] == expected
    rows = {(i["quota"], i["flavor"]): i for i in body["items"]}
    # b-1 holds its GPU from 2 h to 3 h; root counts it too
    b_gpu, root_gpu = rows[("q-ws-b", "gpu/any")], rows[("root", "gpu/any")]
    assert (b_gpu["used"], b_gpu["running_jobs"], root_gpu["used"]) == (1000, 1, 1000)
    assert rows[("q-ws-a", "gpu/any")]["used"] == 0
    naive = dispatched.get(
        "/v1/quotas/tree", params={"at": "2026-11-01T02:30:00"}, headers=bearer(tokens["admin"])
    )
    assert naive.status_code == 422 and "time zone" in naive.json()["detail"]
