"""The API in-process (FastAPI's TestClient) on a fresh database with two workspaces' jobs,
and a token per role."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from consumers.projector import Projector
from dlc_ledger.api.app import create_app
from dlc_ledger.services.prices import publish_price_book
from dlc_ledger.services.tokens import create_token
from dlc_ledger.services.yaml_files import load_price_book
from ledger.events import JobStarted, JobSubmitted, OccupancyEnded, OccupancyStarted
from ledger.store.postgres import PostgresEventStore
from projections.registry import all_projections
from tests.demo_files import DEMO_PRICE_BOOK
from tests.projections.builders import Narrator, at, replica

#: (uid, workspace): ws-b's jobs must never reach a ws-a token
JOBS = [("a-1", "ws-a"), ("a-2", "ws-a"), ("b-1", "ws-b"), ("c-1", "ws-c")]
ROLES = {
    "admin": ["admin"],
    "finance": ["finance"],
    "auditor": ["auditor"],
    "lead-a": ["workspace:ws-a"],
    "lead-ac": ["workspace:ws-a", "workspace:ws-c"],
    "lead-b": ["workspace:ws-b"],
}


def seed_jobs(store: PostgresEventStore) -> None:
    n = Narrator("api")
    for i, (uid, workspace) in enumerate(JOBS):
        n.tell(
            JobSubmitted(
                job_uid=uid,
                name=f"train-{uid}",
                namespace=f"team-{workspace}",
                kind="PyTorchJob",
                framework="pytorch",
                workspace=workspace,
                quota=f"q-{workspace}",
                user="alice",
                priority=5,
                billing_mode="public",
                replicas=(replica(),),
            ),
            f"job/{uid}",
            at(i),
            source="api/alice",
        )
        n.tell(JobStarted(job_uid=uid), f"job/{uid}", at(i + 10))
        # one GPU for an hour each: 2.40 USD at the demo price book's public rate
        pod = f"pod-{uid}"
        n.tell(
            OccupancyStarted(
                occupancy_id=pod,
                job_uid=uid,
                pod_uid=pod,
                pod_name=pod,
                node="node-1",
                flavor="gpu/any",
                mgpu=1000,
                cpu_milli=0,
                memory_mib=0,
                workspace=workspace,
                started_at=at(3600 * i),
            ),
            f"job/{uid}",
            at(3600 * i),
        )
        n.tell(
            OccupancyEnded(
                occupancy_id=pod,
                job_uid=uid,
                pod_uid=pod,
                ended_at=at(3600 * (i + 1)),
                reason="completed",
            ),
            f"job/{uid}",
            at(3600 * (i + 1)),
        )
    publish_price_book(store, load_price_book(DEMO_PRICE_BOOK), at=at(0))
    store.append(n.events)
    Projector(store, all_projections()).catch_up()


@pytest.fixture
def client(store: PostgresEventStore) -> Iterator[TestClient]:
    seed_jobs(store)
    with TestClient(create_app(store), raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def tokens(store: PostgresEventStore) -> dict[str, str]:
    """Role name -> bearer secret."""
    return {
        name: create_token(store.engine, roles, name=name, created_by="test").secret
        for name, roles in ROLES.items()
    }


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}
