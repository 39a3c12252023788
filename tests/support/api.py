"""The API in-process (FastAPI's TestClient) on a fresh database with two workspaces' jobs,
and a token per role; ``dispatched`` adds a quota tree (ws-a, ws-b and ws-c under
different subtrees), pending jobs, the dispatcher's decisions, a node and invoices."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from consumers.projector import Projector
from dlc_ledger.api.app import create_app
from dlc_ledger.services.access import create_token
from dlc_ledger.services.billing import publish_price_book, tick
from dlc_ledger.services.quotas import apply_quota_file
from dlc_ledger.services.subscriptions import purchase
from dlc_ledger.services.yaml_files import load_price_book
from ledger.events import (
    AdmissionDecided,
    JobQueued,
    JobStarted,
    JobSubmitted,
    NodeRegistered,
    OccupancyEnded,
    OccupancyStarted,
    PreemptionDecided,
    Victim,
)
from ledger.store.postgres import PostgresEventStore
from projections.billing.projection import catch_up_billing
from projections.registry import all_projections
from tests.support.builders import EPOCH, Narrator, at, replica
from tests.support.demo_files import DEMO_PRICE_BOOK

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


#: each workspace under its own subtree of ``root``; ws-c's leaf is team-c's only child,
#: so its subtree is ``team-c`` and that leaf
QUOTA_TREE = """
quotas:
  - name: root
    min: {gpu/any: 8000}
  - name: q-ws-a
    parent: root
    min: {gpu/any: 2000}
    max: {gpu/any: 4000}
    workspaces: [ws-a]
  - name: q-ws-b
    parent: root
    min: {gpu/any: 2000}
    max: {gpu/any: 4000}
    workspaces: [ws-b]
  - name: team-c
    parent: root
    min: {gpu/any: 4000}
  - name: q-ws-c
    parent: team-c
    min: {gpu/any: 4000}
    workspaces: [ws-c]
"""
#: pending jobs (queued at 4 h, never started: more than their quota's max): (uid,
#: workspace, mGPU)
PENDING = [("a-9", "ws-a", 5000), ("b-9", "ws-b", 5000)]
BILLED_AT = EPOCH + timedelta(days=35)  # November closed and invoiced


def seed_dispatch(store: PostgresEventStore) -> None:
    """After :func:`seed_jobs` on a store holding :data:`QUOTA_TREE`: two pending jobs,
    admissions of the seeded jobs, a preemption of b-1 by a-2 (a reclaim across
    subtrees), one node, and November's invoices."""
    n = Narrator("api-dispatch")
    for i, (uid, _) in enumerate(JOBS):
        n.tell(
            AdmissionDecided(job_uid=uid, quota=f"q-{JOBS[i][1]}", outcome="admit"),
            f"quota/q-{JOBS[i][1]}",
            at(3600 * i),
            source="dispatcher",
        )
    n.tell(
        PreemptionDecided(
            preemptor="a-2",
            victims=(Victim(job_uid="b-1", quota="q-ws-b", reason="Reclaim"),),
            reason="Reclaim",
            state={"q-ws-a": {"gpu/any.used": 1000, "gpu/any.min": 2000}},
            quota="q-ws-a",
        ),
        "quota/q-ws-a",
        at(3600 * 2 + 1800),
        source="dispatcher",
    )
    for uid, workspace, mgpu in PENDING:
        n.tell(
            JobSubmitted(
                job_uid=uid,
                name=f"train-{uid}",
                namespace=f"team-{workspace}",
                workspace=workspace,
                quota=f"q-{workspace}",
                user="bob",
                priority=3,
                replicas=(replica(mgpu=mgpu, cpu_milli=0, memory_mib=0),),
            ),
            f"job/{uid}",
            at(4 * 3600),
            source="api/bob",
        )
        n.tell(JobQueued(job_uid=uid), f"job/{uid}", at(4 * 3600))
    n.tell(
        NodeRegistered(node="node-1", pool="pool-x", gpus=8, cpu_milli=64000, memory_mib=512000),
        "node/node-1",
        at(0),
    )
    store.append(n.events)
    Projector(store, all_projections()).catch_up()
    tick(store, BILLED_AT)
    catch_up_billing(store)  # the invoices issued, in the read model


def seed_world(
    store: PostgresEventStore,
    *,
    workspace: str,
    more: Callable[[PostgresEventStore], None] | None = None,
) -> str:
    """The quota tree, the jobs (and ``more``), the dispatcher's decisions and one month of a
    g2 node bought by ``workspace``: every kind of thing a route names. The purchase's
    subscription id."""
    apply_quota_file(store, QUOTA_TREE, principal="api/test", at=EPOCH)
    seed_jobs(store)
    if more is not None:
        more(store)
    seed_dispatch(store)
    bought = purchase(
        store,
        group="gpu-g2",
        spec="ml.g2.8xlarge",
        nodes=1,
        term="month",
        workspace=workspace,
        principal="test",
        at=EPOCH + timedelta(days=1),
    )
    return bought.subscription.subscription_id


@pytest.fixture
def dispatched(store: PostgresEventStore) -> Iterator[TestClient]:
    """The API on the quota tree, the jobs (:func:`seed_jobs`) and :func:`seed_dispatch`."""
    apply_quota_file(store, QUOTA_TREE, principal="api/test", at=EPOCH)
    seed_jobs(store)
    seed_dispatch(store)
    with TestClient(create_app(store), raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def client(store: PostgresEventStore) -> Iterator[TestClient]:
    seed_jobs(store)
    with TestClient(create_app(store), raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def tokens(store: PostgresEventStore) -> dict[str, str]:
    """Role name -> bearer secret."""
    return {
        name: create_token(store, roles, name=name, created_by="test").secret
        for name, roles in ROLES.items()
    }


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def same_as_cli(api: object, cli: object) -> bool:
    """Whether an API value equals the CLI's JSON of it, on the keys both have (money is
    ``*_display`` in the API, a decimal ``<name>`` in the CLI) and with the CLI's
    ``+00:00`` instants written ``Z``."""

    def norm(value: object) -> object:
        if isinstance(value, str) and value.endswith("+00:00"):
            return value[: -len("+00:00")] + "Z"
        return value

    if isinstance(api, dict) and isinstance(cli, dict):
        shared = set(api) & set(cli)
        return (bool(shared) or api == cli) and all(same_as_cli(api[k], cli[k]) for k in shared)
    if isinstance(api, list) and isinstance(cli, list):
        return len(api) == len(cli) and all(
            same_as_cli(a, c) for a, c in zip(api, cli, strict=True)
        )
    return norm(api) == norm(cli)


def without_freshness(body: dict[str, object]) -> dict[str, object]:
    """A page's body less its ``freshness`` (checked: the read models' position and lag)."""
    fresh = body.get("freshness")
    assert isinstance(fresh, dict), body
    assert fresh["behind"] == fresh["head"] - fresh["projected"] >= 0, fresh
    return {k: v for k, v in body.items() if k != "freshness"}
