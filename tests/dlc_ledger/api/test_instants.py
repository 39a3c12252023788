"""Every instant query parameter (``at``, ``from``, ``to``, ``as_of``) of every route takes
ISO 8601 with a zone and nothing else: a number (which pydantic alone reads as a Unix
time), a naive time or a bare date is a 422 problem naming the parameter; so is an instant
outside [1970, 2200), which once overflowed into a 500.

The routes and their instant parameters come from the OpenAPI document, so a route added
later is held to the same rule without editing this file."""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient

from dlc_ledger.api.app import openapi_document
from dlc_ledger.services.subscriptions import purchase
from ledger.store.postgres import PostgresEventStore
from tests.support.api import bearer
from tests.support.builders import EPOCH

INSTANTS = ("at", "from", "to", "as_of")
#: path parameter -> a value naming seeded data (the ``dispatched`` fixture; the
#: subscription's id is known once :func:`_subscribe` bought it)
PATHS = {"quota": "q-ws-a", "uid": "a-9", "group": "gpu-g2", "subscription_id": ""}
NOT_INSTANTS = [
    "0",
    "1700000000",
    "1700000000.5",
    "-1",
    "2026-11-01T00:00:00",
    "2026-11-01",
    "2026-11-01 00:00",
    "yesterday",
    "",
]
VALID = ["2026-11-01T04:00:00Z", "2026-11-01T05:00:00+01:00", "2026-11-01 04:00:00.5z"]
#: well-formed instants outside the range a query may name (they once overflowed into 500s)
OUT_OF_RANGE = [
    "9999-12-31T00:00:00Z",
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-01:00",
    "1969-12-31T23:59:59Z",
    "2200-01-01T00:00:00Z",
]


def _instant_parameters() -> list[tuple[str, str]]:
    doc = json.loads(openapi_document())
    found = []
    for path, operations in doc["paths"].items():
        for parameter in operations.get("get", {}).get("parameters", []):
            if parameter["in"] == "query" and parameter["name"] in INSTANTS:
                found.append((path, parameter["name"]))
    return found


ROUTES = _instant_parameters()


def _subscribe(store: PostgresEventStore) -> dict[str, str]:
    """:data:`PATHS` with a subscription bought into its group."""
    order = purchase(
        store,
        group=PATHS["group"],
        spec="ml.g2.8xlarge",
        nodes=1,
        term="month",
        workspace="ws-a",
        principal="test",
        at=EPOCH,
    )
    return {**PATHS, "subscription_id": order.subscription.subscription_id}


def test_the_document_names_every_route_with_instants() -> None:
    paths = {path for path, _ in ROUTES}
    assert len(ROUTES) >= 18 and len(paths) >= 11, ROUTES
    for path, _ in ROUTES:  # a path parameter this test cannot fill would hide a route
        assert set(re.findall(r"\{([^}:]+)", path)) <= set(PATHS), path


@pytest.mark.parametrize(("path", "name"), ROUTES)
def test_an_instant_must_be_iso_8601_with_a_zone(
    dispatched: TestClient,
    tokens: dict[str, str],
    store: PostgresEventStore,
    path: str,
    name: str,
) -> None:
    paths = _subscribe(store) if "{subscription_id}" in path or "{group}" in path else PATHS
    url = re.sub(r"\{([^}:]+)(:[^}]*)?\}", lambda m: paths[m.group(1)], path)
    headers = bearer(tokens["admin"])
    for value in NOT_INSTANTS:
        response = dispatched.get(url, params={name: value}, headers=headers)
        assert response.status_code == 422, (url, name, value, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        detail = response.json()["detail"]
        assert detail.startswith(f"query.{name}:") and "time zone" in detail, detail
    for value in OUT_OF_RANGE:
        response = dispatched.get(url, params={name: value}, headers=headers)
        assert response.status_code == 422, (url, name, value, response.text)
        detail = response.json()["detail"]
        assert detail.startswith(f"query.{name}:") and "1970-01-01" in detail, detail
    for value in VALID:
        response = dispatched.get(url, params={name: value}, headers=headers)
        assert response.status_code == 200, (url, name, value, response.text)


def test_an_instant_keeps_its_offset(dispatched: TestClient, tokens: dict[str, str]) -> None:
    """``+01:00`` is an instant an hour before the same wall time in UTC."""
    headers = bearer(tokens["admin"])
    utc = dispatched.get("/v1/queues/root?at=2026-11-01T05:00:00Z", headers=headers).json()
    offset = dispatched.get(
        "/v1/queues/root", params={"at": "2026-11-01T06:00:00+01:00"}, headers=headers
    ).json()
    assert offset["now"] == utc["now"] == "2026-11-01T05:00:00Z"
