"""Every write route against generated input (issue 44, part 8): schemathesis calls each
POST, PUT and DELETE operation the app publishes with generated paths, queries and bodies,
as an admin and as a workspace token, on a seeded database. No answer may be a 5xx or
carry an undocumented content type: a tenant's input is refused with a 4xx that names it.

The writes really write (the database is this module's own), so later examples meet the
state earlier ones left: a rule set, a grant made, a subscription bought.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from schemathesis import checks

from dlc_ledger.api.app import create_app, openapi_document
from dlc_ledger.services.access import create_token
from ledger.store.postgres import PostgresEventStore
from tests.support.api import bearer, seed_world
from tests.support.databases import TemplateDatabases
from tests.support.grants import grant

CHECKS = [checks.not_a_server_error, checks.content_type_conformance]

schema = schemathesis.openapi.from_dict(json.loads(openapi_document())).include(
    method=["POST", "PUT", "DELETE"]
)


@pytest.fixture(scope="module")
def seeded(databases: TemplateDatabases) -> Iterator[tuple[FastAPI, dict[str, dict[str, str]]]]:
    url = databases.clone()
    store = PostgresEventStore(url)
    try:
        seed_world(store, workspace="ws-a")
        grant(store, "ws-a", "WS_A_HOOK")
        headers = {
            role: bearer(create_token(store, [role], name=f"fuzz-{i}", created_by="t").secret)
            for i, role in enumerate(("admin", "workspace:ws-a", "finance"))
        }
        yield create_app(store), headers
    finally:
        store.close()
        databases.drop(url)


def test_the_document_has_write_routes() -> None:
    labels = {result.ok().label for result in schema.get_all_operations()}
    assert "PUT /v1/notifications/rules/{workspace}/{name}" in labels
    assert "POST /v1/subscriptions" in labels and len(labels) >= 7


@pytest.mark.parametrize("role", ["admin", "workspace:ws-a", "finance"])
@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_no_write_answers_5xx(
    case: Any, role: str, seeded: tuple[FastAPI, dict[str, dict[str, str]]]
) -> None:
    app, headers = seeded
    case.call_and_validate(app=app, headers=headers[role], checks=CHECKS)
