"""Reads never project: they show the read models as projected, say how far behind the store
they are, and wait (bounded) for a position when asked; the writes bring them to the head."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from dlc_ledger.api.app import create_app
from dlc_ledger.services.access import create_token
from dlc_ledger.services.quotas import apply_quota_file
from ledger.store.postgres import PostgresEventStore
from projections.registry import catch_up_all
from tests.support.clis import CliCall, cli_process
from tests.support.factories import EPOCH, job_succeeded, occupancy_started

TREE = """
quotas:
  - name: root
    min: {gpu/any: 8000}
  - name: team
    parent: root
    min: {gpu/any: 4000}
    workspaces: [ws-ls]
"""


def _checkpoints(store: PostgresEventStore) -> dict[str, int]:
    with store.snapshot() as uow:
        return {c.name: c.position for c in uow.checkpoints("projection:")}


@pytest.fixture
def behind(store: PostgresEventStore) -> PostgresEventStore:
    """Two jobs projected, then two more events the projector has not seen."""
    store.append([occupancy_started(1), job_succeeded(1)])
    catch_up_all(store)
    store.append([occupancy_started(2), job_succeeded(2)])
    return store


@pytest.fixture
def api(behind: PostgresEventStore) -> Iterator[tuple[TestClient, dict[str, str]]]:
    secret = create_token(behind, ["admin"], name="admin", created_by="test").secret
    with TestClient(create_app(behind), raise_server_exceptions=False) as client:
        yield client, {"Authorization": f"Bearer {secret}"}


def test_an_api_read_says_how_far_behind_and_moves_no_checkpoint(
    behind: PostgresEventStore, api: tuple[TestClient, dict[str, str]]
) -> None:
    client, auth = api
    before = _checkpoints(behind)
    response = client.get("/v1/jobs", headers=auth)
    assert response.status_code == 200, response.text
    head = behind.head_position()
    projected = min(before.values())
    assert response.headers["Ledger-Head-Position"] == str(head)
    assert response.headers["Ledger-Projected-Position"] == str(projected)
    assert response.headers["Ledger-Behind"] == str(head - projected) == "2"
    assert response.json()["freshness"] == {"head": head, "projected": projected, "behind": 2}
    assert [j["job_uid"] for j in response.json()["items"]] == ["job-1"]  # as projected
    assert _checkpoints(behind) == before  # the read projected nothing
    # every route says it; a document says it in its body too
    whoami = client.get("/v1/whoami", headers=auth)
    assert whoami.headers["Ledger-Behind"] == "2"
    job = client.get("/v1/jobs/job-1", headers=auth).json()
    assert job["freshness"] == {"head": head, "projected": projected, "behind": 2}


def test_an_api_read_waits_for_a_position_bounded(
    behind: PostgresEventStore, api: tuple[TestClient, dict[str, str]]
) -> None:
    client, auth = api
    head = behind.head_position()
    late = client.get(f"/v1/jobs?min_position={head}&wait=0", headers=auth)
    assert late.status_code == 503, late.text
    assert late.headers["content-type"] == "application/problem+json"
    assert f"not {head}" in late.json()["detail"]
    beyond = client.get(f"/v1/jobs?min_position={head + 10}&wait=0", headers=auth)
    assert beyond.status_code == 400 and "beyond the store's head" in beyond.json()["detail"]
    assert client.get("/v1/jobs?wait=31", headers=auth).status_code == 422
    catch_up_all(behind)  # the projector catches up
    fresh = client.get(f"/v1/jobs?min_position={head}", headers=auth)
    assert fresh.status_code == 200 and fresh.headers["Ledger-Behind"] == "0"
    assert {j["job_uid"] for j in fresh.json()["items"]} == {"job-1", "job-2"}


def test_a_cli_read_notes_the_lag_on_stderr_and_projects_nothing(
    behind: PostgresEventStore, database_url: str
) -> None:
    before = _checkpoints(behind)
    done = cli_process(database_url, "jobs", "list", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert "note: the read models are 2 events behind the store" in done.stderr
    assert '"job-2"' not in done.stdout and '"job-1"' in done.stdout
    assert _checkpoints(behind) == before
    head = behind.head_position()
    waited = cli_process(
        database_url, "--wait-for", str(head), "--wait-timeout", "0", "jobs", "list"
    )
    assert waited.returncode == 69, waited.stderr  # unavailable: try again
    assert f"not {head}" in waited.stderr
    catch_up_all(behind)
    current = cli_process(database_url, "--wait-for", str(head), "jobs", "list", "--format", "json")
    assert current.returncode == 0 and "note:" not in current.stderr
    assert '"job-2"' in current.stdout


def test_a_write_leaves_the_reads_current(store: PostgresEventStore, cli: CliCall) -> None:
    store.append([occupancy_started(1, at=EPOCH)])
    apply_quota_file(store, TREE, principal="test", at=EPOCH)
    with store.snapshot() as uow:
        head = uow.head_position()
        assert all(c.position == head for c in uow.checkpoints("projection:"))
    assert "team" in cli("quotas", "list")
