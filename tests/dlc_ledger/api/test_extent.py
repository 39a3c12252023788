"""``/v1/extent`` (issue 36): the cluster time the store holds, its clusters, whether
they are a replay's (``replay-<trace>``), and the label the server was started with;
one answer for every role."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from dlc_ledger.api.app import create_app
from ledger.events import JobSucceeded
from ledger.store.postgres import PostgresEventStore
from projections.registry import catch_up_all
from tests.dlc_ledger.api.finance_data import seed_costs
from tests.support.api import ROLES, bearer, without_freshness
from tests.support.builders import Narrator, at


def _extent(client: TestClient, token: str) -> dict[str, Any]:
    response = client.get("/v1/extent", headers=bearer(token))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = without_freshness(response.json())
    return body


def test_the_span_of_a_live_clusters_facts(
    store: PostgresEventStore, tokens: dict[str, str]
) -> None:
    seed_costs(store)
    with TestClient(create_app(store)) as client:
        answers = [_extent(client, tokens[role]) for role in ROLES]
    assert answers == [answers[0]] * len(ROLES)  # every role, the same answer
    assert answers[0] == {
        "first": "2026-11-01T00:00:00Z",
        "last": "2026-11-01T01:03:00Z",  # the last occupancy's end: the cluster clock
        "replayed": False,
        "clusters": ["test"],
        "run": None,
    }


def test_a_replays_facts_and_the_runs_label(
    store: PostgresEventStore, tokens: dict[str, str]
) -> None:
    seed_costs(store, source="kube-watcher/replay-openb-pod")
    app = create_app(store, run_label="replay openb-pod x60")
    with TestClient(app) as client:
        body = _extent(client, tokens["lead-a"])
    assert (body["replayed"], body["clusters"], body["run"]) == (
        True, ["replay-openb-pod"], "replay openb-pod x60"
    )  # fmt: skip


def test_an_empty_store_has_no_extent(store: PostgresEventStore, tokens: dict[str, str]) -> None:
    with TestClient(create_app(store)) as client:
        body = _extent(client, tokens["auditor"])
        assert body == {"first": None, "last": None, "replayed": False, "clusters": [], "run": None}
        assert client.get("/v1/extent").status_code == 401


def test_the_extent_is_the_read_models_and_says_how_far_behind(
    store: PostgresEventStore, tokens: dict[str, str]
) -> None:
    # a bounded read (issue 37): the extent read model, never a scan of the events; a fact
    # the projector has not folded yet shows in the freshness, not in the span
    seed_costs(store)
    n = Narrator("extent-late")
    n.tell(JobSucceeded(job_uid="late"), "job/late", at(86_400), source="kube-watcher/other")
    store.append(n.events)
    with TestClient(create_app(store)) as client:
        response = client.get("/v1/extent", headers=bearer(tokens["auditor"]))
        body = response.json()
        assert (body["last"], body["clusters"]) == ("2026-11-01T01:03:00Z", ["test"])
        assert body["freshness"]["behind"] == 1
        catch_up_all(store)
        body = _extent(client, tokens["auditor"])
        assert (body["last"], body["clusters"]) == ("2026-11-02T00:00:00Z", ["other", "test"])
