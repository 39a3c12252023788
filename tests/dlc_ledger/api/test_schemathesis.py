"""The API against its own OpenAPI document, by schemathesis: every GET operation the app
publishes, called with generated parameters and an admin token on a seeded database. No
response may be a 5xx, fall outside its documented schema, or carry an undocumented status
code or content type.

The operations come from the app's document as built (``openapi_document()``), not a list
here, so routes added later are covered without editing this file. Random path values
mostly miss (404), so a path parameter named in ``SEEDED_PATHS`` is also drawn from the
seeded data and ``group_by`` from its valid keys: the 200 bodies, the ones worth checking
against their schemas, come up too; ``test_seeded_requests_answer_200_within_schema``
makes sure they do.

Schemathesis' lazy ``from_fixture`` loader does not run under pytest 9 (it rewrites a node
attribute pytest removed), so the document is loaded at import and the app with its
database is a module-scoped fixture handed to each call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis import checks
from sqlalchemy import text

from dlc_ledger.api.app import create_app, openapi_document
from dlc_ledger.services.access import create_token
from dlc_ledger.services.quotas import apply_quota_file
from ledger.store.postgres import PostgresEventStore
from projections.billing.reports import GROUP_KEYS
from projections.inventory.projection import INVENTORY_GROUP_KEYS
from projections.registry import catch_up_all
from tests.support.api import QUOTA_TREE, bearer, seed_dispatch, seed_jobs, without_freshness
from tests.support.builders import EPOCH, Narrator
from tests.support.databases import TemplateDatabases
from tests.support.workloads import tell_workloads

CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]

schema = schemathesis.openapi.from_dict(json.loads(openapi_document())).include(method="GET")

#: path parameter name -> values that name seeded data (filled in by the ``seeded`` fixture)
SEEDED_PATHS: dict[str, list[str]] = {}
#: query parameter name -> valid values worth drawing besides the generated ones
QUERY_VALUES: dict[str, st.SearchStrategy[str]] = {
    "group_by": st.lists(st.sampled_from(GROUP_KEYS), min_size=1, unique=True).map(",".join),
}
#: extra queries for the seeded check, by path (the defaults alone show little)
SEEDED_QUERIES: dict[str, list[dict[str, str]]] = {
    "/v1/jobs": [{"at": "2026-11-01T00:00:05Z"}, {"workspace": "ws-b", "limit": "1"}],
    "/v1/usage": [{"group_by": ",".join(GROUP_KEYS)}],
    "/v1/cost": [
        {"group_by": ",".join(GROUP_KEYS), "source": "rated"},
        {"group_by": "workspace,month", "source": "rated", "net_credits": "true"},
    ],
    # the quota tree's window figures and cost, goodput's other key, every inventory key
    "/v1/quotas/tree": [{"from": "2026-11-01T00:00:00Z", "to": "2026-12-01T00:00:00Z"}],
    "/v1/goodput": [{"by": "workspace"}],
    "/v1/inventory": [{"group_by": ",".join(INVENTORY_GROUP_KEYS)}, {"group_by": ""}],
    "/v1/queues/{quota}": [{"at": "2026-11-01T05:00:00+01:00"}],
    "/v1/ledger/export": [{"period": "2026-11"}, {"period": "2026-11", "format": "csv"}],
}
#: routes with a required query parameter: checked with their seeded queries only
QUERY_REQUIRED = {"/v1/ledger/export"}


def _path_names(path: str) -> list[str]:
    return re.findall(r"\{([^}:]+)", path)


@schema.hook
def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any]) -> Any:
    names = _path_names(context.operation.path)
    if not names or not all(name in SEEDED_PATHS for name in names):
        return st.just(path_parameters)
    seeded = st.fixed_dictionaries({n: st.sampled_from(SEEDED_PATHS[n]) for n in names})
    return st.one_of(st.just(path_parameters), seeded)


@schema.hook
def flatmap_query(context: Any, query: dict[str, Any] | None) -> Any:
    known = {p.name for p in context.operation.query} & set(QUERY_VALUES)
    if not known:
        return st.just(query)
    valid = st.fixed_dictionaries({name: QUERY_VALUES[name] for name in known})
    return st.one_of(st.just(query), valid.map(lambda v: {**(query or {}), **v}))


@pytest.fixture(scope="module")
def seeded(databases: TemplateDatabases) -> Iterator[tuple[FastAPI, dict[str, str]]]:
    """One seeded database for every operation (a fresh one each would cost more than the
    calls); the routes only read, so the operations cannot disturb each other."""
    url = databases.clone()
    store = PostgresEventStore(url)
    try:
        apply_quota_file(store, QUOTA_TREE, principal="api/test", at=EPOCH)
        seed_jobs(store)
        seed_dispatch(store)
        workloads = Narrator(salt="schemathesis-workloads")
        tell_workloads(workloads)  # a service and a notebook (docs/workloads.md)
        store.append(workloads.events)
        catch_up_all(store)
        secret = create_token(store, ["admin"], name="schemathesis", created_by="test")
        with store.engine.connect() as conn:
            event_ids = conn.execute(text("SELECT event_id::text FROM events LIMIT 3")).scalars()
            SEEDED_PATHS["event_id"] = list(event_ids)
            invoices = conn.execute(text("SELECT invoice_id FROM billing_invoices")).scalars()
            SEEDED_PATHS["invoice_id"] = list(invoices)
        SEEDED_PATHS["uid"] = ["a-1", "b-1", "a-9", "train-c-1"]
        SEEDED_PATHS["service_uid"] = ["svc", "nb"]
        SEEDED_PATHS["quota"] = ["q-ws-a", "root", "team-c"]
        SEEDED_PATHS["stream"] = ["job/a-1", "job/b-1"]
        yield create_app(store), bearer(secret.secret)
    finally:
        SEEDED_PATHS.clear()
        store.close()
        databases.drop(url)


@schema.parametrize()
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_every_get_route_keeps_to_its_schema(
    case: Any, seeded: tuple[FastAPI, dict[str, str]]
) -> None:
    app, headers = seeded
    case.call_and_validate(app=app, headers=headers, checks=CHECKS)


def test_seeded_requests_answer_200_within_schema(
    seeded: tuple[FastAPI, dict[str, str]],
) -> None:
    """Each operation whose path parameters name seeded data, called with them: a 200 whose
    body keeps to the documented schema (the property test above may, by chance, see few)."""
    app, headers = seeded
    checked = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        names = _path_names(operation.path)
        if not all(name in SEEDED_PATHS for name in names):
            continue
        defaults: list[dict[str, str]] = [] if operation.path in QUERY_REQUIRED else [{}]
        for query in [*defaults, *SEEDED_QUERIES.get(operation.path, [])]:
            case = operation.Case(
                path_parameters={n: SEEDED_PATHS[n][0] for n in names}, query=query
            )
            response = case.call(app=app, headers=headers)
            assert response.status_code == 200, (operation.label, query, response.text)
            json_body = "application/json" in str(response.headers.get("content-type"))
            body = response.json() if json_body else response.text  # /metrics: text
            assert body, (operation.label, query)  # not an empty page
            case.validate_response(response, checks=CHECKS, headers=headers)
            checked += 1
    assert checked >= 7


def test_what_schemathesis_found_stays_fixed(seeded: tuple[FastAPI, dict[str, str]]) -> None:
    """Each once a 500 (or an undocumented status), now a documented answer."""
    app, headers = seeded
    with TestClient(app, raise_server_exceptions=False) as client:
        for url in ("/v1/jobs?user=%00", "/v1/jobs/a%00", "/v1/streams/job/%00/events"):
            response = client.get(url, headers=headers)
            assert response.status_code == 422, (url, response.text)
            assert "NUL character" in response.json()["detail"]
        beyond = client.get("/v1/streams/job/a-1/events?cursor=3000000000", headers=headers)
        assert beyond.status_code == 200 and without_freshness(beyond.json()) == {
            "items": [],
            "next_cursor": None,
        }
        unknown = client.get("/v1/jobs?status=Sleeping", headers=headers)
        assert unknown.status_code == 400  # and 400 is in the document now:
    responses = json.loads(openapi_document())["paths"]["/v1/jobs"]["get"]["responses"]
    assert "application/problem+json" in responses["400"]["content"]
