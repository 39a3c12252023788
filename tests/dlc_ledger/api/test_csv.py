"""CSV on every list route (``?format=csv`` or ``Accept: text/csv``): header = the JSON
items' keys, one row per item, nested values as JSON, an attachment named for the route,
and the next page in a ``Link`` header (relative, or under ``DLC_PUBLIC_URL``, never from
``Host``). ``Accept`` is negotiated as RFC 9110 says: any case, ``q`` weights."""

from __future__ import annotations

import csv
import io
import json

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError
from starlette.requests import Request

from consumers.projector import Projector
from dlc_ledger.api.app import create_app
from dlc_ledger.api.csv_responses import next_page_url, prefers_csv
from dlc_ledger.wiring.settings import Settings
from ledger.events import JobSubmitted
from ledger.store.postgres import PostgresEventStore
from projections.registry import all_projections
from tests.support.api import bearer, seed_jobs
from tests.support.builders import Narrator, at, replica

#: every list route, with the parameters that make it non-empty on the seed
LISTS = {
    "/v1/jobs": ("jobs", {}),
    "/v1/streams/job/a-1/events": ("stream-events", {}),
    "/v1/usage": ("usage", {"group_by": "workspace,flavor"}),
    "/v1/cost": ("cost", {"group_by": "workspace,month", "source": "rated"}),
    "/v1/quotas/tree": ("quota-tree", {"from": "2026-11-01T00:00:00Z"}),
    "/v1/quotas/q-ws-a/series": ("quota-series", {"to": "2026-11-01T03:00:00Z"}),
    "/v1/queues/root": ("queue", {}),
    "/v1/waits": ("waits", {}),
    "/v1/preemptions": ("preemptions", {}),
    "/v1/goodput": ("goodput", {"by": "workspace"}),
    "/v1/invoices": ("invoices", {}),
    "/v1/inventory": ("inventory", {"group_by": "pool,node"}),
}


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


@pytest.mark.parametrize("route", sorted(LISTS))
def test_csv_holds_the_json_items(
    dispatched: TestClient, tokens: dict[str, str], route: str
) -> None:
    name, params = LISTS[route]
    headers = bearer(tokens["admin"])
    items = dispatched.get(route, params={**params, "limit": 1000}, headers=headers).json()["items"]
    assert items, route
    for asked in ({"params": {**params, "format": "csv"}, "headers": headers},
                  {"params": params, "headers": {**headers, "Accept": "text/csv"}}):  # fmt: skip
        response = dispatched.get(route, **asked)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "text/csv; charset=utf-8"
        assert response.headers["content-disposition"] == f'attachment; filename="{name}.csv"'
        header = response.text.splitlines()[0].split(",")
        assert header == list(items[0]), route
        rows = _rows(response.text)
        assert rows == [{k: _cell(v) for k, v in item.items()} for item in items[: len(rows)]]
    # format=json wins over the Accept header
    explicit = dispatched.get(
        route, params={**params, "format": "json"}, headers={**headers, "Accept": "text/csv"}
    )
    assert explicit.headers["content-type"] == "application/json"


def test_nested_values_are_json_in_their_cell(
    dispatched: TestClient, tokens: dict[str, str]
) -> None:
    response = dispatched.get("/v1/queues/root?format=csv", headers=bearer(tokens["admin"]))
    rows = _rows(response.text)
    assert [r["job_uid"] for r in rows] == ["a-9", "b-9"]
    assert json.loads(rows[0]["request"]) == {"gpu/any": 5000}
    assert rows[0]["estimated_start"] == ""  # null: an empty cell


def test_a_csv_page_links_to_the_next(dispatched: TestClient, tokens: dict[str, str]) -> None:
    headers = bearer(tokens["admin"])
    seen: list[str] = []
    url: str | None = "/v1/invoices?format=csv&limit=2"
    while url is not None:
        response = dispatched.get(url, headers=headers)
        assert response.status_code == 200, response.text
        seen += [r["workspace"] for r in _rows(response.text)]
        link = response.headers.get("link")
        if link is None:
            url = None
            continue
        target, rel = link.split("; ")
        assert rel == 'rel="next"' and target.startswith("</v1/invoices?") and target.endswith(">")
        url = target[1:-1]
        assert "format=csv" in url and "limit=2" in url and "cursor=" in url
    assert seen == ["ws-a", "ws-b", "ws-c"]


def _next_link(client: TestClient, url: str, headers: dict[str, str]) -> str:
    response = client.get(url, headers=headers)
    assert response.status_code == 200, response.text
    link = str(response.headers["link"])
    assert link.startswith("<") and link.endswith('>; rel="next"'), link
    return link[1 : -len('>; rel="next"')]


def test_a_link_never_names_the_host_the_client_sent(
    dispatched: TestClient, tokens: dict[str, str]
) -> None:
    """A hostile ``Host`` (or ``X-Forwarded-Host``) is not echoed: without a configured
    public URL the link is a path, relative to wherever the client reached the server."""
    headers = {
        **bearer(tokens["admin"]),
        "Host": "evil.example",
        "X-Forwarded-Host": "evil.example",
        "X-Forwarded-Proto": "https",
    }
    target = _next_link(dispatched, "/v1/invoices?format=csv&limit=1", headers)
    assert target.startswith("/v1/invoices?") and "evil" not in target, target
    follow = dispatched.get(target, headers=bearer(tokens["admin"]))
    assert follow.status_code == 200 and follow.headers["content-type"].startswith(CSV)


def test_a_link_is_under_the_configured_public_url(
    store: PostgresEventStore, tokens: dict[str, str]
) -> None:
    seed_jobs(store)
    app = create_app(store, public_url="https://ledger.example/api")
    with TestClient(app) as client:
        headers = {**bearer(tokens["admin"]), "Host": "evil.example"}
        target = _next_link(client, "/v1/jobs?format=csv&limit=1&workspace=ws-a", headers)
    assert target.startswith("https://ledger.example/api/v1/jobs?"), target
    assert "workspace=ws-a" in target and "limit=1" in target and "cursor=" in target


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("https://ledger.example.com/", "https://ledger.example.com"),
        ("http://127.0.0.1:8000/ledger", "http://127.0.0.1:8000/ledger"),
        ("", None),
    ],
)
def test_the_public_url_setting(
    monkeypatch: pytest.MonkeyPatch, given: str, kept: str | None
) -> None:
    monkeypatch.setenv("DLC_PUBLIC_URL", given)
    assert Settings().public_url == kept


@pytest.mark.parametrize(
    "given",
    [
        "ledger.example.com",
        "ftp://ledger.example.com",
        "https://u:p@x.example",
        "https://x.example/?a=1",
    ],
)
def test_a_public_url_that_is_not_an_origin_is_refused(
    monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    monkeypatch.setenv("DLC_PUBLIC_URL", given)
    with pytest.raises(ValidationError, match="DLC_PUBLIC_URL"):
        Settings()


def test_a_link_escapes_what_would_end_it(client: TestClient, tokens: dict[str, str]) -> None:
    """A path with ``>``, ``"``, a space or ``,`` (a stream name is free text) stays one
    URI reference inside the ``<...>``."""
    headers = bearer(tokens["admin"])
    response = client.get('/v1/streams/job/a"> b,c/events?format=csv&limit=1', headers=headers)
    assert response.status_code == 200, response.text
    assert "link" not in response.headers  # an empty stream: no next page; the same path:
    target = _next_link(client, "/v1/streams/job/a-1/events?format=csv&limit=1", headers)
    assert target.startswith("/v1/streams/job/a-1/events?")
    assert next_page_url_for('/v1/streams/job/a"> b,c/events') == (
        "/v1/streams/job/a%22%3E%20b,c/events?format=csv&cursor=X"
    )


def next_page_url_for(path: str) -> str:
    """:func:`next_page_url` for a request to ``path?format=csv`` (no server needed)."""
    app = create_app(None)
    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "query_string": b"format=csv",
        "headers": [(b"host", b"evil.example")],
        "app": app,
    }
    return next_page_url(Request(scope), "X")


CSV = "text/csv"

#: (Accept header, CSV?): media types in any case, q weights, the most specific range
#: deciding, ``*/*`` JSON's, a tie JSON's
NEGOTIATION = [
    ("", False),
    ("*/*", False),
    ("application/json", False),
    ("text/csv", True),
    ("TEXT/CSV", True),
    ("Text/Csv; charset=utf-8", True),
    ("text/csv;q=0", False),
    ("text/csv; Q=0", False),
    ("text/csv;q=0.0, */*", False),
    ("text/csv, application/json", False),  # a tie: JSON
    ("application/json, text/csv", False),
    ("text/csv;q=0.9, application/json;q=0.8", True),
    ("text/csv;q=0.5, application/json", False),
    ("application/json;q=0.1, text/csv", True),
    ("text/csv;q=0.5, */*;q=0.4", True),
    ("text/csv;q=0.4, */*;q=0.5", False),
    ("text/*", True),
    ("text/*, text/csv;q=0", False),  # the most specific range decides
    ("application/*;q=0.2, text/*;q=0.3", True),
    ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", False),  # a browser
    ("text/csv;q=2", False),  # malformed q: the range is left out
    ("text/csv;q=abc", False),
    ("text/csv;q=0.2, text/csv;q=0.7, application/json;q=0.5", True),
    (" , ;q=1, text/csv", True),
]


@pytest.mark.parametrize(("accept", "csv_wanted"), NEGOTIATION)
def test_accept_is_negotiated(accept: str, csv_wanted: bool) -> None:
    assert prefers_csv(accept) is csv_wanted


@pytest.mark.parametrize(
    ("accept", "csv_wanted"),
    [("TEXT/CSV", True), ("text/csv;q=0", False), ("text/csv, application/json", False)],
)
def test_a_route_answers_as_negotiated(
    client: TestClient, tokens: dict[str, str], accept: str, csv_wanted: bool
) -> None:
    response = client.get("/v1/jobs", headers={**bearer(tokens["admin"]), "Accept": accept})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith(CSV if csv_wanted else "application/json")
    assert response.headers["vary"] == "Accept"


def test_a_scoped_csv_holds_the_scoped_rows(dispatched: TestClient, tokens: dict[str, str]) -> None:
    response = dispatched.get("/v1/quotas/tree?format=csv", headers=bearer(tokens["lead-a"]))
    rows = _rows(response.text)
    # the subtree's node, under a parent it may name but not read
    assert {(r["quota"], r["parent"]) for r in rows} == {("q-ws-a", "root")}
    assert "ws-b" not in response.text


@pytest.mark.parametrize("route", sorted(LISTS))
def test_every_list_pages_through_all_its_items(
    dispatched: TestClient, tokens: dict[str, str], route: str
) -> None:
    _, params = LISTS[route]
    headers = bearer(tokens["admin"])
    whole = dispatched.get(route, params={**params, "limit": 1000}, headers=headers).json()
    assert whole["next_cursor"] is None
    seen: list[dict[str, object]] = []
    cursor = None
    for _ in range(len(whole["items"]) + 1):
        page = dispatched.get(
            route,
            params={**params, "limit": 2, **({"cursor": cursor} if cursor else {})},
            headers=headers,
        ).json()
        assert len(page["items"]) <= 2
        seen += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == whole["items"] and len(seen) >= 1, route


def test_a_cell_that_could_start_a_formula_is_prefixed(
    client: TestClient, tokens: dict[str, str], store: PostgresEventStore
) -> None:
    """Names come from pod annotations: one that a spreadsheet would run (``=``, ``+``,
    ``-``, ``@``) is written with a leading ``'`` in CSV, exactly in JSON; numbers stay."""
    hostile = '=HYPERLINK("http://evil","x")'
    n = Narrator("api-formula")
    n.tell(
        JobSubmitted(
            job_uid="f-1", name=hostile, namespace="-team", workspace="ws-a", user="@eve",
            quota="q-ws-a", priority=-12, replicas=(replica(),),
        ),
        "job/f-1",
        at(99),
    )  # fmt: skip
    store.append(n.events)
    Projector(store, all_projections()).catch_up()
    headers = bearer(tokens["admin"])
    (item,) = client.get("/v1/jobs?workspace=ws-a&user=@eve", headers=headers).json()["items"]
    assert (item["name"], item["user"], item["namespace"]) == (hostile, "@eve", "-team")
    response = client.get("/v1/jobs?workspace=ws-a&user=@eve&format=csv", headers=headers)
    (row,) = _rows(response.text)
    assert (row["name"], row["user"], row["namespace"]) == ("'" + hostile, "'@eve", "'-team")
    assert row["priority"] == "-12"  # a number, not text
