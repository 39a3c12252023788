"""The typed response models on a busier cluster than the API's seed (the ``jobs why``
tests' tree: finished, preempted, running, pending and never-fitting jobs, run-time
medians, a price book): every such route answers 200 (a body outside its model would be
a 500), with the bodies the CLI's JSON holds."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from dlc_ledger.api.app import create_app
from dlc_ledger.services.access import create_token
from ledger.store.postgres import PostgresEventStore
from tests.dlc_ledger.why.test_why_cli import cluster
from tests.support.api import bearer, same_as_cli, without_freshness
from tests.support.builders import Narrator
from tests.support.clis import CliCall

__all__ = ["cluster"]  # the fixture, shared with the CLI's tests

UIDS = ["f1", "f2", "v", "hp", "r1", "r2", "w1", "big", "w2", "b1", "b2"]


@pytest.fixture
def api(
    store: PostgresEventStore, cluster: Narrator
) -> Iterator[tuple[TestClient, dict[str, str]]]:
    secret = create_token(store, ["admin"], name="models", created_by="test").secret
    with TestClient(create_app(store), raise_server_exceptions=False) as client:
        yield client, bearer(secret)


def test_why_of_every_job_keeps_to_its_model(
    api: tuple[TestClient, dict[str, str]], cli: CliCall
) -> None:
    client, headers = api
    answers = set()
    for uid in UIDS:
        response = client.get(f"/v1/jobs/{uid}/why", headers=headers)
        assert response.status_code == 200, (uid, response.text)
        body = without_freshness(response.json())  # the API's, not the CLI's (stderr there)
        expected = json.loads(cli("jobs", "why", uid, "--format", "json"))
        assert same_as_cli(body, expected), (uid, body, expected)
        assert list(body) == list(expected), uid  # nothing left out or added; same order
        answers.add(body["answer"])
    assert answers >= {"pending", "running", "finished"}
    (lost,) = client.get("/v1/jobs/v/why", headers=headers).json()["preemptions"]
    assert (lost["lost_cost_minor"], lost["lost_cost_display"]) == (200, "2.00 USD")


@pytest.mark.parametrize(
    "url",
    [
        "/v1/queues/root",
        "/v1/queues/team-a",
        "/v1/quotas/tree",
        "/v1/quotas/tree?from=2026-11-01T00:00:00Z&to=2026-11-02T00:00:00Z",
        "/v1/quotas/team-b/series?to=2026-11-01T02:00:00Z",
        "/v1/waits",
        "/v1/preemptions",
        "/v1/goodput",
        "/v1/goodput?by=workspace",
    ],
)
def test_the_reports_keep_to_their_models(api: tuple[TestClient, dict[str, str]], url: str) -> None:
    client, headers = api
    response = client.get(url, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json()["items"], url
