"""``/v1/services``, ``/v1/services/{uid}`` and ``/v1/notebooks``: the CLI's reads over HTTP,
scoped as ``/v1/jobs`` (issue 46, part 2 in part)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from ledger.store.postgres import PostgresEventStore
from tests.support.api import bearer
from tests.support.workloads import service_world


def test_services_and_notebooks_over_http(
    client: TestClient, store: PostgresEventStore, tokens: dict[str, str]
) -> None:
    service_world(store)
    admin = bearer(tokens["admin"])
    (svc,) = client.get("/v1/services", headers=admin).json()["items"]
    assert (svc["job_uid"], svc["framework"], svc["replicas"][0]["replicas"]) == (
        "svc",
        "service",
        2,
    )
    assert svc["mgpu_seconds"] == 6_600_000
    detail = client.get("/v1/services/svc", headers=admin).json()
    assert [(h["change"], h["replicas"]) for h in detail["replica_history"]] == [
        ("created", 1),
        ("scaled", 2),
        ("deleted", 0),
    ]
    # each replica as billed: public resources, no quota drawing on subscribed groups
    assert [(r["occupancy_id"], r["billing_mode"]) for r in detail["replicas_billed"]] == [
        ("ranker-0", "public"),
        ("ranker-1", "public"),
    ]
    (nb,) = client.get("/v1/notebooks", headers=admin).json()["items"]
    assert nb["job_uid"] == "nb"
    assert client.get("/v1/services/train", headers=admin).status_code == 404
    csv = client.get("/v1/services?format=csv", headers=admin)
    assert csv.status_code == 200 and "svc" in csv.text


def test_another_workspace_s_service_is_neither_listed_nor_found(
    client: TestClient, store: PostgresEventStore, tokens: dict[str, str]
) -> None:
    service_world(store)  # everything in ws-a
    lead_b = bearer(tokens["lead-b"])
    assert client.get("/v1/services", headers=lead_b).json()["items"] == []
    assert client.get("/v1/services/svc", headers=lead_b).status_code == 404
