"""CSV on every list route (``?format=csv`` or ``Accept: text/csv``): header = the JSON
items' keys, one row per item, nested values as JSON, an attachment named for the route,
and the next page in a ``Link`` header."""

from __future__ import annotations

import csv
import io
import json

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import bearer

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
        assert rel == 'rel="next"' and target.startswith("<http") and target.endswith(">")
        url = target[1:-1]
        assert "format=csv" in url and "limit=2" in url and "cursor=" in url
    assert seen == ["ws-a", "ws-b", "ws-c"]


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
