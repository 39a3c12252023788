"""The headers every answer carries (docs/api.md "Headers and negotiation"), for every
operation of the app's OpenAPI document as built (a route added later is covered without
editing this file), and HEAD on every GET route.

Each operation is called with an admin token, its path parameters named from the seeded
data (every GET a 200) and again with random values (the error answers: they carry the
headers too); a write as a dry run (nothing is written). Every answer has the API's
Content-Security-Policy (``default-src 'none'``: data, never a document to render),
``nosniff``, ``no-referrer``, ``Cache-Control: no-store`` (the request carried a bearer)
and, under ``/v1``, ``Vary: Accept``. The dashboard's and the vendored docs' pages have
their own policy; the docs are off by default, and render in chromium under theirs.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi.testclient import TestClient
from httpx import Response
from playwright.sync_api import sync_playwright
from sqlalchemy import text

from dlc_ledger.api.access_log import API_CONTENT_SECURITY_POLICY
from dlc_ledger.api.api_docs import DOCS_CONTENT_SECURITY_POLICY
from dlc_ledger.api.app import create_app, openapi_document
from dlc_ledger.api.dashboard_mount import CONTENT_SECURITY_POLICY as DASHBOARD_POLICY
from dlc_ledger.api.metrics import REQUESTS
from dlc_ledger.services.access import create_token
from ledger.store.postgres import PostgresEventStore
from projections.registry import catch_up_all
from tests.support.api import bearer, seed_world
from tests.support.builders import Narrator
from tests.support.dashboard import CHROMIUM, _start, require_chromium
from tests.support.databases import TemplateDatabases
from tests.support.workloads import tell_workloads

OPERATIONS = sorted(
    (path, method)
    for path, operations in json.loads(openapi_document())["paths"].items()
    for method in operations
)
GETS = [path for path, method in OPERATIONS if method == "get"]
#: path parameters -> a value naming seeded data, and one naming nothing
SEEDED: dict[str, str] = {
    "uid": "a-1",
    "service_uid": "svc",
    "quota": "q-ws-a",
    "stream": "job/a-1",
    "group": "gpu-g2",
    "workspace": "ws-a",
    "name": "no-such-rule",
    "variable": "NO_SUCH_GRANT",
    "period": "2026-11",
}
RANDOM: dict[str, str] = {
    "event_id": "00000000-0000-4000-8000-000000000037",
    "invoice_id": "INV-none",
    "uid": "no-such-job",
    "service_uid": "no-such-service",
    "quota": "no-such-quota",
    "stream": "job/no-such-job",
    "group": "no-such-group",
    "subscription_id": "sub-none",
    "workspace": "ws-none",
    "name": "no-such-rule",
    "variable": "NO_SUCH_GRANT",
    "period": "1999-01",
}
#: the query parameters a route requires (a month's journal names its month)
REQUIRED_QUERY: dict[str, str] = {"/v1/ledger/export": "?period=2026-11"}


@dataclass(frozen=True)
class Served:
    client: TestClient
    headers: dict[str, str]  # an admin's bearer
    seeded: dict[str, str]


@pytest.fixture(scope="module")
def served(databases: TemplateDatabases) -> Iterator[Served]:
    url = databases.clone()
    store = PostgresEventStore(url)
    try:
        subscription_id = seed_world(store, workspace="ws-a")
        workloads = Narrator(salt="headers-workloads")
        tell_workloads(workloads)  # a service and a notebook (docs/workloads.md)
        store.append(workloads.events)
        catch_up_all(store)
        secret = create_token(store, ["admin"], name="headers", created_by="test").secret
        with store.engine.connect() as conn:
            seeded = {
                **SEEDED,
                "subscription_id": subscription_id,
                "event_id": str(
                    conn.execute(text("SELECT event_id FROM events LIMIT 1")).scalar_one()
                ),
                "invoice_id": str(
                    conn.execute(
                        text("SELECT invoice_id FROM billing_invoices LIMIT 1")
                    ).scalar_one()
                ),
            }
        with TestClient(create_app(store), raise_server_exceptions=False) as client:
            yield Served(client, bearer(secret), seeded)
    finally:
        store.close()
        databases.drop(url)


def _url(path: str, values: dict[str, str]) -> str:
    named = re.sub(r"\{([^}:]+)(:[^}]*)?\}", lambda m: values[m.group(1)], path)
    return named + REQUIRED_QUERY.get(path, "")


def _assert_common(response: Response, path: str, *, policy: str) -> None:
    where = (response.request.method, str(response.request.url), response.status_code)
    assert response.headers.get("content-security-policy") == policy, where
    assert response.headers.get("x-content-type-options") == "nosniff", where
    assert response.headers.get("referrer-policy") == "no-referrer", where
    if path.startswith("/v1/"):
        assert response.headers.get("vary") == "Accept", where


def _assert_bearer_answer(response: Response, path: str) -> None:
    _assert_common(response, path, policy=API_CONTENT_SECURITY_POLICY)
    assert response.headers.get("cache-control") == "no-store", response.request.url


@pytest.mark.parametrize(("path", "method"), OPERATIONS)
@pytest.mark.parametrize("values", ["seeded", "random"])
def test_every_answer_carries_the_headers(
    served: Served, path: str, method: str, values: str
) -> None:
    named = served.seeded if values == "seeded" else RANDOM
    response = served.client.request(
        method,
        _url(path, named),
        headers=served.headers,
        params=None if method == "get" else {"dry_run": "true"},
        json={"dry_run": True} if method in ("post", "put") else None,
    )
    assert response.status_code < 500, (method, path, response.text)
    if method == "get" and values == "seeded":
        assert response.status_code == 200, (path, response.text)  # a real answer, checked
    _assert_bearer_answer(response, path)


def test_a_csv_answer_and_a_problem_carry_them_too(served: Served) -> None:
    for url in ("/v1/jobs?format=csv", "/v1/jobs?limit=0", "/v1/nowhere", "/v1/jobs/a%00"):
        response = served.client.get(url, headers=served.headers)
        _assert_bearer_answer(response, url)
    anonymous = served.client.get("/v1/jobs")
    assert anonymous.status_code == 401
    _assert_common(anonymous, "/v1/jobs", policy=API_CONTENT_SECURITY_POLICY)


@pytest.mark.parametrize("path", GETS)
def test_head_answers_every_get_route_with_its_headers(served: Served, path: str) -> None:
    url = _url(path, served.seeded)
    get = served.client.get(url, headers=served.headers)
    head = served.client.head(url, headers=served.headers)
    assert head.status_code == get.status_code == 200, (path, head.status_code, get.text)
    assert head.content == b""
    # the same headers, but for what differs between two calls (Date; a metrics dump's
    # length, which counts the GET itself)
    varying = {"date"} | ({"content-length"} if path == "/metrics" else set())
    same = {k: v for k, v in get.headers.items() if k not in varying}
    assert {k: v for k, v in head.headers.items() if k not in varying} == same, path


@pytest.mark.parametrize(
    "url",
    [
        "/",
        "/dashboard/app.js",
        "/openapi.json",
        "/v1/jobs?limit=1",
        "/v1/jobs?format=csv",
        "/v1/streams/job/a-1/events",
        "/v1/invoices",
    ],
)
def test_head_outside_the_operations(served: Served, url: str) -> None:
    get = served.client.get(url, headers=served.headers)
    head = served.client.head(url, headers=served.headers)
    assert head.status_code == get.status_code == 200, url
    assert head.content == b"" and get.content
    assert head.headers["content-length"] == get.headers["content-length"] == str(len(get.content))
    assert head.headers["content-type"] == get.headers["content-type"]


def test_a_head_is_logged_and_counted_as_one(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    """The access log and the metrics see the HEAD, under the route the GET matched."""
    before = REQUESTS.labels("/v1/jobs/{uid}", "HEAD", "2xx")._value.get()
    with caplog.at_level(logging.INFO, logger="dlc_ledger.api.access"):
        assert served.client.head("/v1/jobs/a-1", headers=served.headers).status_code == 200
    assert REQUESTS.labels("/v1/jobs/{uid}", "HEAD", "2xx")._value.get() == before + 1
    assert any(" HEAD /v1/jobs/a-1 200 " in r.getMessage() for r in caplog.records)


def test_head_on_a_write_only_route_is_a_get_there(served: Served) -> None:
    """Where GET is not allowed, HEAD is not either (405, with the allowed methods)."""
    url = "/v1/subscriptions/sub-none/renew"
    head = served.client.head(url, headers=served.headers)
    assert head.status_code == 405 and head.content == b""
    assert "POST" in head.headers["allow"]


def test_the_dashboard_has_its_policy(served: Served) -> None:
    for url in ("/", "/dashboard/index.html", "/dashboard/app.js"):
        response = served.client.get(url)
        assert response.status_code == 200, url
        _assert_common(response, url, policy=DASHBOARD_POLICY)


def test_no_cdn_docs_by_default(served: Served) -> None:
    """FastAPI's /docs and /redoc (code from a CDN) are off; the document stays."""
    for url in ("/docs", "/redoc", "/docs/assets/init.js"):
        assert served.client.get(url).status_code == 404, url
    assert served.client.get("/openapi.json").json()["info"]["title"] == "DLC Ledger API"


def test_the_vendored_docs_run_only_this_origins_files(store: PostgresEventStore) -> None:
    with TestClient(create_app(store, api_docs=True)) as client:
        page = client.get("/docs")
        assert page.status_code == 200
        _assert_common(page, "/docs", policy=DOCS_CONTENT_SECURITY_POLICY)
        assert "'unsafe-inline'" not in DOCS_CONTENT_SECURITY_POLICY
        assert "default-src 'self'" in DOCS_CONTENT_SECURITY_POLICY
        html = page.text
        # every script is a file of this origin; none inline, nothing from elsewhere
        scripts = re.findall(r"<script([^>]*)>(.*?)</script>", html, re.DOTALL)
        assert scripts and all(body.strip() == "" for _, body in scripts)
        sources = [s for s in re.findall(r'(?:src|href)="([^"]+)"', html) if s != "data:,"]
        assert sources and all(s.startswith("docs/assets/") for s in sources), sources
        for source in sources:
            asset = client.get(f"/{source}")
            assert asset.status_code == 200, source
            assert asset.headers["x-content-type-options"] == "nosniff"
        init = client.get("/docs/assets/init.js").text
        assert 'url: "openapi.json"' in init and "http" not in init
        assert client.get("/redoc").status_code == 404


def test_the_vendored_docs_render_in_a_browser_under_their_policy() -> None:
    """Swagger UI draws the document in chromium with the page's policy enforced: every
    request stays on the origin and nothing is refused (a CSP violation is a console
    error). Over a real uvicorn, which also answers HEAD with the GET's length and no body."""
    require_chromium()
    server, thread, port = _start(create_app(None, api_docs=True))
    origin = f"http://127.0.0.1:{port}"
    try:
        head = httpx.head(f"{origin}/openapi.json")
        get = httpx.get(f"{origin}/openapi.json")
        assert head.status_code == 200 and head.content == b""
        assert head.headers["content-length"] == str(len(get.content))
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM)
            page = browser.new_page()
            problems: list[str] = []
            requested: list[str] = []
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.on("request", lambda r: requested.append(r.url))
            page.goto(f"{origin}/docs")
            page.wait_for_selector(".swagger-ui .info .title", timeout=30_000)
            assert page.inner_text(".swagger-ui .info .title").startswith("DLC Ledger API")
            assert page.locator(".opblock").count() == len(OPERATIONS)
            browser.close()
        assert problems == [], problems
        assert requested and all(url.startswith(origin + "/") for url in requested), requested
    finally:
        server.should_exit = True
        thread.join(timeout=10)
