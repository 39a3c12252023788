"""The API core: bearer auth, problem details, access log, /v1/whoami and /v1/jobs."""

from __future__ import annotations

import csv
import io
import logging

import pytest
from fastapi.testclient import TestClient

from dlc_ledger.api.app import create_app
from dlc_ledger.services.access import create_token, revoke
from ledger.store.postgres import PostgresEventStore
from tests.support.api import bearer

PROBLEM = "application/problem+json"


def test_no_or_bad_token_is_a_401_problem(client: TestClient) -> None:
    for headers in ({}, bearer("dlct_nope"), bearer("junk"), {"Authorization": "Basic eDp5"}):
        response = client.get("/v1/jobs", headers=headers)
        assert response.status_code == 401, headers
        assert response.headers["content-type"] == PROBLEM
        assert response.headers["www-authenticate"] == "Bearer"
        body = response.json()
        assert body["status"] == 401 and body["title"] == "Unauthorized"
        assert body["instance"] == "/v1/jobs"


def test_a_revoked_token_gets_401_at_once(
    client: TestClient, tokens: dict[str, str], store: PostgresEventStore
) -> None:
    me = client.get("/v1/whoami", headers=bearer(tokens["lead-a"]))
    assert me.status_code == 200
    assert me.json() == {
        "token_id": me.json()["token_id"],
        "name": "lead-a",
        "roles": ["workspace:ws-a"],
        "workspaces": ["ws-a"],
    }
    revoke(store, me.json()["token_id"])
    assert client.get("/v1/whoami", headers=bearer(tokens["lead-a"])).status_code == 401
    assert client.get("/v1/whoami", headers=bearer(tokens["admin"])).json()["workspaces"] is None


def test_jobs_list_pages_with_a_cursor_and_filters(
    client: TestClient, tokens: dict[str, str]
) -> None:
    headers = bearer(tokens["finance"])
    first = client.get("/v1/jobs", params={"limit": 3}, headers=headers).json()
    assert [j["job_uid"] for j in first["items"]] == ["c-1", "b-1", "a-2"]
    rest = client.get(
        "/v1/jobs", params={"limit": 3, "cursor": first["next_cursor"]}, headers=headers
    ).json()
    assert [j["job_uid"] for j in rest["items"]] == ["a-1"] and rest["next_cursor"] is None
    only_b = client.get("/v1/jobs", params={"workspace": "ws-b"}, headers=headers).json()
    assert [j["job_uid"] for j in only_b["items"]] == ["b-1"]
    then = client.get("/v1/jobs", params={"at": "2026-11-01T00:00:01.5Z"}, headers=headers).json()
    assert {j["job_uid"] for j in then["items"]} == {"a-1", "a-2"}


def test_invalid_parameters_are_422_or_400_problems(
    client: TestClient, tokens: dict[str, str]
) -> None:
    headers = bearer(tokens["admin"])
    bad_limit = client.get("/v1/jobs", params={"limit": 0}, headers=headers)
    assert bad_limit.status_code == 422 and bad_limit.headers["content-type"] == PROBLEM
    assert "limit" in bad_limit.json()["detail"]
    bad_status = client.get("/v1/jobs", params={"status": "Sleeping"}, headers=headers)
    assert bad_status.status_code == 400 and "unknown status" in bad_status.json()["detail"]
    naive = client.get("/v1/jobs", params={"at": "2026-11-01T00:00:00"}, headers=headers)
    assert naive.status_code == 422 and "time zone" in naive.json()["detail"]
    missing = client.get("/v1/nothing-here", headers=headers)
    assert missing.status_code == 404 and missing.headers["content-type"] == PROBLEM


def test_one_job_with_its_timeline(client: TestClient, tokens: dict[str, str]) -> None:
    response = client.get("/v1/jobs/a-1", headers=bearer(tokens["auditor"]))
    assert response.status_code == 200, response.text
    job = response.json()
    assert job["job_uid"] == "a-1" and job["workspace"] == "ws-a"
    assert [e["type"] for e in job["timeline"]] == [
        "JobSubmitted",
        "OccupancyStarted",
        "JobStarted",
        "OccupancyEnded",
    ]
    assert job["occupied"][0]["mgpu_seconds"] == 3600 * 1000
    (cost,) = job["cost"]
    assert (cost["rated_minor"], cost["rated_display"], cost["scale"]) == (240, "2.40 USD", 2)
    unknown = client.get("/v1/jobs/zz", headers=bearer(tokens["auditor"]))
    assert unknown.status_code == 404 and "no job" in unknown.json()["detail"]


def test_a_jobs_timeline_as_a_list(client: TestClient, tokens: dict[str, str]) -> None:
    headers = bearer(tokens["auditor"])
    timeline = client.get("/v1/jobs/a-1", headers=headers).json()["timeline"]
    # a page at a time, by uid or by name, the same entries as the job's timeline
    first = client.get("/v1/jobs/train-a-1/timeline", params={"limit": 3}, headers=headers)
    assert first.status_code == 200, first.text
    rest = client.get(
        "/v1/jobs/a-1/timeline", params={"cursor": first.json()["next_cursor"]}, headers=headers
    ).json()
    assert first.json()["items"] + rest["items"] == timeline and rest["next_cursor"] is None
    # CSV: one row per entry, the columns of the JSON items
    as_csv = client.get("/v1/jobs/a-1/timeline", params={"format": "csv"}, headers=headers)
    assert as_csv.headers["content-type"].startswith("text/csv")
    assert 'filename="job-timeline.csv"' in as_csv.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(as_csv.text)))
    assert [(r["type"], r["late"]) for r in rows] == [
        (e["type"], str(e["late"]).lower()) for e in timeline
    ]
    for bad, status in (("/v1/jobs/zz/timeline", 404), ("/v1/jobs/a-1/timeline?cursor=x", 400)):
        response = client.get(bad, headers=headers)
        assert response.status_code == status and response.headers["content-type"] == PROBLEM


def test_every_request_logs_one_access_line_naming_the_principal(
    client: TestClient, tokens: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="dlc_ledger.api.access"):
        client.get("/v1/jobs", headers=bearer(tokens["lead-b"]))
        client.get("/v1/jobs")
    lines = [r.getMessage() for r in caplog.records if r.name == "dlc_ledger.api.access"]
    assert len(lines) == 2
    assert lines[0].startswith("lead-b(tok_") and " GET /v1/jobs 200 " in lines[0]
    assert lines[1].startswith("- GET /v1/jobs 401 ")


def test_events_by_id_and_by_stream(client: TestClient, tokens: dict[str, str]) -> None:
    headers = bearer(tokens["auditor"])
    first = client.get("/v1/streams/job/a-1/events", params={"limit": 1}, headers=headers)
    assert first.status_code == 200, first.text
    page = first.json()
    assert [e["type"] for e in page["items"]] == ["JobSubmitted"]
    assert page["next_cursor"] == "1"
    rest = client.get(
        "/v1/streams/job/a-1/events", params={"cursor": page["next_cursor"]}, headers=headers
    ).json()
    assert [e["type"] for e in rest["items"]] == [
        "JobStarted",
        "OccupancyStarted",
        "OccupancyEnded",
    ]
    assert rest["next_cursor"] is None
    event_id = page["items"][0]["event_id"]
    one = client.get(f"/v1/events/{event_id}", headers=headers).json()
    assert one == page["items"][0] and one["data"]["workspace"] == "ws-a"
    assert client.get("/v1/events/not-a-uuid", headers=headers).status_code == 422
    gone = client.get("/v1/events/00000000-0000-0000-0000-000000000000", headers=headers)
    assert gone.status_code == 404


def test_usage_and_cost_as_the_report_groups_them(
    client: TestClient, tokens: dict[str, str]
) -> None:
    headers = bearer(tokens["finance"])
    usage = client.get("/v1/usage", params={"group_by": "workspace"}, headers=headers)
    assert usage.status_code == 200, usage.text
    assert [(r["workspace"], r["mgpu_seconds"]) for r in usage.json()["items"]] == [
        ("ws-a", 2 * 3600 * 1000),
        ("ws-b", 3600 * 1000),
        ("ws-c", 3600 * 1000),
    ]
    cost = client.get(
        "/v1/cost", params={"group_by": "workspace,job", "source": "rated"}, headers=headers
    )
    assert cost.status_code == 200, cost.text
    a1 = cost.json()["items"][0]
    assert (a1["workspace"], a1["job"], a1["cost_minor"], a1["currency"]) == (
        "ws-a",
        "a-1",
        240,
        "USD",
    )
    assert (a1["scale"], a1["cost_display"], a1["cost_minor_precise"]) == (2, "2.40 USD", "240")
    bad = client.get("/v1/cost", params={"group_by": "planet"}, headers=headers)
    assert bad.status_code == 400 and "planet" in bad.json()["detail"]
    bad_source = client.get("/v1/cost", params={"source": "guess"}, headers=headers)
    assert bad_source.status_code == 422


def test_a_workspace_token_gets_its_own_totals_only(
    client: TestClient, tokens: dict[str, str]
) -> None:
    headers = bearer(tokens["lead-ac"])
    cost = client.get(
        "/v1/cost", params={"group_by": "month", "source": "rated"}, headers=headers
    ).json()
    assert [(r["month"], r["cost_minor"]) for r in cost["items"]] == [("2026-11", 3 * 240)]
    usage = client.get("/v1/usage", params={"group_by": "flavor"}, headers=headers).json()
    assert usage["items"][0]["mgpu_seconds"] == 3 * 3600 * 1000


def test_an_unreachable_database_is_a_bare_503_problem() -> None:
    broken = PostgresEventStore("postgresql+psycopg://postgres@127.0.0.1:1/nowhere")
    try:
        with TestClient(create_app(broken), raise_server_exceptions=False) as test_client:
            response = test_client.get("/v1/whoami", headers=bearer("dlct_" + "x" * 43))
    finally:
        broken.close()
    assert response.status_code == 503  # unavailable: the error tree's kind, try again
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["detail"] == "the database is unavailable; try again"
    assert "127.0.0.1" not in response.text and "psycopg" not in response.text


def test_a_garbled_cursor_is_a_400(client: TestClient, tokens: dict[str, str]) -> None:
    response = client.get("/v1/jobs", params={"cursor": "%%%"}, headers=bearer(tokens["admin"]))
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == PROBLEM


def test_metrics_count_requests_by_route_template(
    client: TestClient, tokens: dict[str, str]
) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    scrape = bearer(tokens["admin"])

    def requests_to(route: str) -> float:
        text = client.get("/metrics", headers=scrape).text
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            if family.name == "dlc_api_requests"
            for sample in family.samples
            if sample.name == "dlc_api_requests_total"
            and sample.labels == {"route": route, "method": "GET", "status": "2xx"}
        )

    before = requests_to("/v1/jobs/{uid}")
    assert client.get("/v1/jobs/a-1", headers=bearer(tokens["admin"])).status_code == 200
    assert client.get("/v1/jobs/a-2", headers=bearer(tokens["admin"])).status_code == 200
    assert requests_to("/v1/jobs/{uid}") == before + 2
    text = client.get("/metrics", headers=scrape).text
    assert "dlc_api_request_seconds_bucket" in text and "/v1/jobs/a-1" not in text


def test_metrics_answer_an_admin_or_metrics_token_and_only_to_get(
    client: TestClient, tokens: dict[str, str], store: PostgresEventStore
) -> None:
    scraper = create_token(store, ["metrics"], name="prometheus", created_by="test").secret
    for headers in ({}, bearer("dlct_nope")):
        response = client.get("/metrics", headers=headers)
        assert response.status_code == 401 and response.headers["content-type"] == PROBLEM
        assert "dlc_api_requests_total" not in response.text
    for role in ("lead-a", "finance", "auditor"):  # reading the ledger is not scraping it
        response = client.get("/metrics", headers=bearer(tokens[role]))
        assert response.status_code == 403, role
        assert response.json()["detail"] == "/metrics needs the role admin or metrics"
    for secret in (tokens["admin"], scraper):
        response = client.get("/metrics", headers=bearer(secret))
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
        assert response.headers["cache-control"] == "no-store"
        assert "dlc_api_requests_total" in response.text
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            refused = client.request(method, "/metrics", headers=bearer(secret))
            assert refused.status_code == 405, method
            assert refused.headers["allow"] == "GET"
            assert "dlc_api_requests_total" not in refused.text
    openmetrics = client.get(
        "/metrics",
        headers={**bearer(scraper), "Accept": "application/openmetrics-text; version=1.0.0"},
    )
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    assert openmetrics.text.rstrip().endswith("# EOF")
    # a scrape token reads nothing of the ledger
    for path in ("/v1/whoami", "/v1/jobs", "/v1/inventory"):
        response = client.get(path, headers=bearer(scraper))
        assert response.status_code == 403, path
        assert response.json()["detail"] == "a metrics token reads /metrics only"


def test_a_bug_is_a_500_with_an_error_id_the_log_has_too(
    client: TestClient,
    tokens: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import re

    import dlc_ledger.api.jobs

    def broken(*args: object, **kwargs: object) -> None:
        raise TypeError("unsupported operand type(s)")

    monkeypatch.setattr(dlc_ledger.api.jobs, "listed_jobs", broken)
    with caplog.at_level(logging.ERROR, logger="dlc_ledger.api"):
        response = client.get("/v1/jobs", headers=bearer(tokens["admin"]))
    assert response.status_code == 500
    found = re.fullmatch(
        r"internal error ([0-9a-f]{12}); see the server log", response.json()["detail"]
    )
    assert found is not None, response.json()
    assert "unsupported operand" not in response.text  # internals stay in the log
    assert any(found.group(1) in r.getMessage() and r.exc_info for r in caplog.records)


def test_the_access_log_escapes_control_characters(
    client: TestClient, tokens: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """A URL holding terminal escape sequences reaches the log escaped, never raw."""
    with caplog.at_level(logging.INFO, logger="dlc_ledger.api.access"):
        client.get("/%1b%5b1A%1b%5b2K%07x", headers=bearer(tokens["lead-b"]))
    (line,) = [r.getMessage() for r in caplog.records if r.name == "dlc_ledger.api.access"]
    assert "\x1b" not in line and "\x07" not in line
    assert "/\\x1b[1A\\x1b[2K\\x07x" in line


def test_an_authenticated_answer_is_never_cached_and_varies_by_accept(
    client: TestClient, tokens: dict[str, str]
) -> None:
    headers = bearer(tokens["lead-b"])
    for url in ("/v1/jobs", "/v1/whoami", "/v1/jobs?format=csv"):
        response = client.get(url, headers=headers)
        assert response.status_code == 200, response.text
        assert response.headers["cache-control"] == "no-store", url
        assert "Accept" in response.headers["vary"], url
    refused = client.get("/v1/jobs")
    assert refused.status_code == 401 and "Accept" in refused.headers["vary"]


def test_a_method_a_route_does_not_have_is_405_naming_those_it_has(
    client: TestClient, tokens: dict[str, str]
) -> None:
    """A write the role may not make on a write route is 403 (the authorization matrix); a
    method the route does not have at all is 405 with ``Allow``, whoever asks."""
    for token in ("admin", "lead-b"):
        response = client.delete("/v1/jobs", headers=bearer(tokens[token]))
        assert response.status_code == 405, response.text
        assert response.headers["allow"] == "GET"
