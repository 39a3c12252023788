"""Every route of docs/openapi.json, for every role: no token → 401, workspace A's token never
sees workspace B's jobs, events or costs, the global roles see everything, the auditor writes
nothing. A route added to the document without an entry here fails the test."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from ledger.store.postgres import PostgresEventStore
from tests.api.conftest import bearer

DOCUMENT = json.loads((Path(__file__).resolve().parents[2] / "docs/openapi.json").read_text())
B_MARKERS = ("ws-b", "b-1")  # any of them in a body: workspace B's data leaked
SAME_FOR_ALL = {"/v1/whoami"}  # shows the caller, no workspace's data
WRITES = ("post", "put", "patch", "delete")


def _b_urls(store: PostgresEventStore) -> dict[str, list[str]]:
    """Per documented path, requests that address workspace B's data."""
    with store.engine.connect() as conn:
        event_id = conn.execute(
            text("SELECT event_id FROM events WHERE stream = 'job/b-1' ORDER BY version LIMIT 1")
        ).scalar_one()
    return {
        "/v1/whoami": ["/v1/whoami"],
        "/v1/jobs": ["/v1/jobs", "/v1/jobs?workspace=ws-b", "/v1/jobs?status=Running"],
        "/v1/jobs/{uid}": ["/v1/jobs/b-1", "/v1/jobs/train-b-1"],
        "/v1/events/{event_id}": [f"/v1/events/{event_id}"],
        "/v1/streams/{stream}/events": ["/v1/streams/job/b-1/events"],
        "/v1/usage": ["/v1/usage", "/v1/usage?group_by=workspace,job"],
        "/v1/cost": [
            "/v1/cost?source=rated",
            "/v1/cost?group_by=job&source=rated",
            "/v1/cost?group_by=workspace,month&net_credits=true&source=rated",
        ],
    }


@pytest.fixture
def b_urls(client: TestClient, store: PostgresEventStore) -> dict[str, list[str]]:
    urls = _b_urls(store)
    assert set(urls) == set(DOCUMENT["paths"]), "give every documented route its B requests"
    return urls


def _sees_b(response: httpx.Response) -> bool:
    if response.headers["content-type"] == "application/problem+json":
        # a problem names only what the request itself said (its path, the uid asked for)
        assert set(response.json()) <= {"type", "title", "status", "detail", "instance"}
        return False
    return any(marker in response.text for marker in B_MARKERS)


def test_no_token_and_bad_tokens_get_401_everywhere(
    client: TestClient, b_urls: dict[str, list[str]], tokens: dict[str, str]
) -> None:
    for path, urls in b_urls.items():
        for method in DOCUMENT["paths"][path]:
            for url in urls:
                for headers in ({}, bearer("dlct_forged"), bearer(tokens["admin"] + "x")):
                    response = client.request(method, url, headers=headers)
                    assert response.status_code == 401, (method, url, headers)
                    assert not _sees_b(response)


def test_workspace_a_never_sees_workspace_b(
    client: TestClient, b_urls: dict[str, list[str]], tokens: dict[str, str]
) -> None:
    for path, urls in b_urls.items():
        for url in urls:
            for role in ("lead-a", "lead-ac"):
                response = client.get(url, headers=bearer(tokens[role]))
                assert response.status_code in (200, 404), (role, url, response.text)
                assert not _sees_b(response), (role, url, response.text)
            # the same request does reach B's data for B and the global roles, so the
            # check above can fail
            readers = (
                ["lead-b"] if path in SAME_FOR_ALL else ["lead-b", "admin", "finance", "auditor"]
            )
            for role in readers:
                response = client.get(url, headers=bearer(tokens[role]))
                assert response.status_code == 200, (role, url, response.text)
                assert _sees_b(response), (role, url)


def test_a_scoped_list_holds_exactly_its_workspaces(
    client: TestClient, tokens: dict[str, str]
) -> None:
    seen = client.get("/v1/jobs", headers=bearer(tokens["lead-ac"])).json()["items"]
    assert sorted(j["job_uid"] for j in seen) == ["a-1", "a-2", "c-1"]
    paged = client.get("/v1/jobs?limit=1", headers=bearer(tokens["lead-a"])).json()
    assert [j["job_uid"] for j in paged["items"]] == ["a-2"]
    rest = client.get(
        "/v1/jobs", params={"cursor": paged["next_cursor"]}, headers=bearer(tokens["lead-a"])
    ).json()
    assert [j["job_uid"] for j in rest["items"]] == ["a-1"] and rest["next_cursor"] is None


def test_the_auditor_reads_and_writes_nothing(
    client: TestClient, b_urls: dict[str, list[str]], tokens: dict[str, str]
) -> None:
    headers = bearer(tokens["auditor"])
    for path, urls in b_urls.items():
        documented = DOCUMENT["paths"][path]
        assert "get" in documented
        for method in WRITES:
            for url in urls:
                response = client.request(method, url, headers=headers)
                expected = 403 if method in documented else 405
                assert response.status_code == expected, (method, url)
                assert response.headers["content-type"] == "application/problem+json"
