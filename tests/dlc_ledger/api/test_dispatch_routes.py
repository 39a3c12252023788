"""``/v1/jobs/{uid}/why``, ``/v1/waits``, ``/v1/preemptions``, ``/v1/goodput``: the
documents and rows of ``jobs why`` and ``report waits|preemptions|goodput``, narrowed to a
workspace token's jobs and quota subtree."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from tests.support.api import bearer, same_as_cli
from tests.support.clis import CliCall


def test_why_is_the_clis_document(
    dispatched: TestClient, tokens: dict[str, str], cli: CliCall
) -> None:
    for uid in ("b-9", "b-1", "a-1"):
        response = dispatched.get(f"/v1/jobs/{uid}/why", headers=bearer(tokens["auditor"]))
        assert response.status_code == 200, response.text
        expected = json.loads(cli("jobs", "why", uid, "--format", "json"))
        assert same_as_cli(response.json(), expected), uid
    pending = dispatched.get("/v1/jobs/b-9/why", headers=bearer(tokens["admin"])).json()
    assert pending["answer"] == "pending"
    assert pending["pending"]["reason"] == "ExceedsMaxQuota"
    assert pending["pending"]["figures"][0]["quota"] == "q-ws-b"
    preempted = dispatched.get("/v1/jobs/b-1/why", headers=bearer(tokens["admin"])).json()
    (p,) = preempted["preemptions"]
    assert (p["preemptor"], p["preemptor_name"], p["rule"]) == ("a-2", "train-a-2", "Reclaim")
    # b-1 ran from 2 h; preempted at 2.5 h, its pod ended at 3 h: an hour at 2.40 USD
    assert (p["lost_cost_minor"], p["scale"], p["lost_cost_display"]) == (240, 2, "2.40 USD")


def test_why_at_an_instant(dispatched: TestClient, tokens: dict[str, str], cli: CliCall) -> None:
    # b-1 ran from 2 h (its pod; the preemption came at 2.5 h); b-9 was submitted at 4 h
    headers = bearer(tokens["admin"])
    then = "2026-11-01T02:15:00Z"
    ran = dispatched.get("/v1/jobs/b-1/why", params={"at": then}, headers=headers)
    assert ran.status_code == 200, ran.text
    assert (ran.json()["answer"], ran.json()["now"]) == ("running", then)
    expected = json.loads(cli("jobs", "why", "b-1", "--at", then, "--format", "json"))
    assert same_as_cli(ran.json(), expected)
    early = dispatched.get("/v1/jobs/b-9/why", params={"at": then}, headers=headers)
    assert early.status_code == 400 and "did not exist" in early.json()["detail"]


def test_why_for_a_workspace_token(dispatched: TestClient, tokens: dict[str, str]) -> None:
    for role, uid in (("lead-a", "b-1"), ("lead-a", "train-b-9"), ("lead-b", "zz")):
        hidden = dispatched.get(f"/v1/jobs/{uid}/why", headers=bearer(tokens[role]))
        assert hidden.status_code == 404, (role, uid)
        assert hidden.headers["content-type"] == "application/problem+json"
    # b-1's own lead reads why it was preempted, not who by: a-2 is ws-a's
    own = dispatched.get("/v1/jobs/b-1/why", headers=bearer(tokens["lead-b"])).json()
    (p,) = own["preemptions"]
    assert (p["preemptor"], p["preemptor_name"], p["preemptor_quota"]) == (None, None, None)
    assert p["state"] == {} and p["lost_cost_minor"] == 240 and p["rule"] == "Reclaim"
    assert "a-2" not in json.dumps(own) and "ws-a" not in json.dumps(own)


def test_waits_preemptions_and_goodput_are_the_reports(
    dispatched: TestClient, tokens: dict[str, str], cli: CliCall
) -> None:
    headers = bearer(tokens["finance"])
    window = ["--from", "2026-11-01T00:00:00Z", "--to", "2026-11-02T00:00:00Z"]
    params = {"from": "2026-11-01T00:00:00Z", "to": "2026-11-02T00:00:00Z"}
    for route, args in (
        ("/v1/waits", ["report", "waits"]),
        ("/v1/preemptions", ["report", "preemptions"]),
        ("/v1/goodput", ["report", "goodput"]),
        ("/v1/goodput?by=workspace", ["report", "goodput", "--by", "workspace"]),
    ):
        response = dispatched.get(route, params=params, headers=headers)
        assert response.status_code == 200, (route, response.text)
        items = response.json()["items"]
        expected = json.loads(cli(*args, *window, "--format", "json"))
        assert items and same_as_cli(items, expected), route
    waits = dispatched.get("/v1/waits", headers=headers).json()["items"]
    # b-1: submitted at 2 s, admitted at 2 h; requeued by its preemption, still waiting
    b = next(w for w in waits if w["quota"] == "q-ws-b")
    assert (b["waits"], b["waiting"], b["max_s"]) == (1, 1, "7198.0")
    goodput = dispatched.get("/v1/goodput", headers=headers).json()["items"]
    assert [(g["quota"], g["gpu_hours"]) for g in goodput] == [
        ("q-ws-a", "2.0000"), ("q-ws-b", "1.0000"), ("q-ws-c", "1.0000")
    ]  # fmt: skip


def test_dispatch_reports_keep_to_the_subtree(
    dispatched: TestClient, tokens: dict[str, str]
) -> None:
    def items(route: str, role: str) -> list[dict[str, object]]:
        response = dispatched.get(route, headers=bearer(tokens[role]))
        assert response.status_code == 200, response.text
        rows: list[dict[str, object]] = response.json()["items"]
        return rows

    assert [w["quota"] for w in items("/v1/waits", "lead-ac")] == ["q-ws-a", "q-ws-c"]
    assert [g["quota"] for g in items("/v1/goodput", "lead-b")] == ["q-ws-b"]
    assert [g["workspace"] for g in items("/v1/goodput?by=workspace", "lead-ac")] == [
        "ws-a", "ws-c"
    ]  # fmt: skip
    # a-2 (ws-a) preempted b-1 (ws-b): B's lead sees its loss, unnamed; A's lead nothing
    assert items("/v1/preemptions", "lead-a") == []
    (loss,) = items("/v1/preemptions", "lead-b")
    assert (loss["victim_uid"], loss["preemptor_uid"], loss["preemptor"]) == ("b-1", None, None)
    (seen,) = items("/v1/preemptions", "auditor")
    assert (seen["preemptor_uid"], seen["preemptor_quota"]) == ("a-2", "q-ws-a")


def test_bad_windows_and_keys_are_problems(dispatched: TestClient, tokens: dict[str, str]) -> None:
    headers = bearer(tokens["admin"])
    naive = dispatched.get("/v1/waits", params={"from": "2026-11-01T00:00:00"}, headers=headers)
    assert naive.status_code == 422 and "time zone" in naive.json()["detail"]
    backwards = dispatched.get(
        "/v1/preemptions",
        params={"from": "2026-11-02T00:00:00Z", "to": "2026-11-01T00:00:00Z"},
        headers=headers,
    )
    assert backwards.status_code == 400 and "before" in backwards.json()["detail"]
    assert dispatched.get("/v1/goodput?by=user", headers=headers).status_code == 422
    garbled = dispatched.get("/v1/waits", params={"cursor": "%%"}, headers=headers)
    assert garbled.status_code == 400 and "cursor" in garbled.json()["detail"]
