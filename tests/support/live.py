"""Fixtures of the live dispatcher tests: kubesim with the official client, the real
watcher writing into a real PostgreSQL store, the real projector, and a dispatcher
acting through :class:`~consumers.dispatcher.kube_actuator.KubeActuator`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from sqlalchemy import select

from consumers.dispatcher import Dispatcher
from consumers.dispatcher.kube_actuator import KubeActuator
from consumers.projector import Projector
from consumers.watchers.listwatch import JOBS, PODS, PYTORCHJOBS, WatchedResource
from consumers.watchers.runner import Watcher
from dlc_ledger.services.quotas import apply_quota_file
from kubesim import BATCH_JOBS, KubeSim
from kubesim.objects import job_object
from kubesim.store import Object
from ledger.store.base import RecordedEvent
from ledger.store.postgres import PostgresEventStore
from projections.jobs.tables import job_state
from projections.registry import all_projections
from tests.support.watchers import bind, settle, start_watcher

__all__ = ["TREE", "Live", "live"]

#: 4 GPUs under one root: team-a (reclaims from borrowers) and team-b, 2 GPUs each
TREE = """
quotas:
  - name: root
    min: {gpu/any: 4000}
  - name: team-a
    parent: root
    min: {gpu/any: 2000}
    preemption: {within_quota: LowerPriority, reclaim: Any}
    workspaces: [ws-a]
  - name: team-b
    parent: root
    min: {gpu/any: 2000}
    workspaces: [ws-b]
"""


class Live:
    """One cluster, one watcher, one store, one dispatcher; ``cycle()`` settles the watcher,
    projects, and runs a dispatcher cycle at the cluster's virtual time."""

    def __init__(
        self,
        sim: KubeSim,
        store: PostgresEventStore,
        tree: str = TREE,
        *,
        resources: tuple[WatchedResource, ...] = (JOBS, PYTORCHJOBS, PODS),
    ) -> None:
        self.sim = sim
        self.store = store
        apply_quota_file(store, tree, principal="api/test", at=sim.clock.now())
        # the job controller's resumed pod binds at once, as a scheduler with room would
        sim.cluster.pod_scheduler = lambda pod: self._bind_later(pod)
        self._to_bind: list[Object] = []
        self.watcher: Watcher = start_watcher(sim, store.append, store=store, resources=resources)
        self.api = client.ApiClient(client.Configuration(host=sim.url))
        self.dispatcher = self.new_dispatcher()

    def _bind_later(self, pod: Object) -> None:
        self._to_bind.append(pod)

    def new_dispatcher(self, **kw: Any) -> Dispatcher:
        kw.setdefault("refresh", self.project)
        kw.setdefault("clock", self.sim.clock.now)
        return Dispatcher(self.store, KubeActuator(self.api), **kw)

    def project(self) -> None:
        while self._to_bind:
            bind(self.sim, self._to_bind.pop(0), "n1")
        settle(self.watcher, self.sim)
        Projector(self.store, all_projections()).catch_up()

    def submit(
        self, name: str, workspace: str, gpus: int, *, priority: int = 0, billing: str = "public"
    ) -> str:
        labels = {"dlc.ledger/workspace": workspace, "dlc.ledger/billing-mode": billing}
        job = job_object(
            name,
            "ns1",
            labels=labels,
            annotations={},
            cpu_milli=1000,
            memory_mib=512,
            gpus=gpus,
            priority=priority,
        )
        job["spec"]["suspend"] = True  # as a Kueue-managed cluster creates every job
        created = self.sim.cluster.create(BATCH_JOBS, job)
        return str(created["metadata"]["uid"])

    def status(self, uid: str) -> str:
        with self.store.engine.connect() as conn:
            return str(
                conn.execute(select(job_state.c.status).where(job_state.c.job_uid == uid)).scalar()
            )

    def suspended(self, name: str) -> bool:
        return bool(self.sim.store.get(BATCH_JOBS, "ns1", name)["spec"].get("suspend"))

    def decisions(self) -> list[RecordedEvent]:
        return self.store.read_by_type(["AdmissionDecided", "PreemptionDecided"])

    def close(self) -> None:
        self.watcher.stop()
        self.api.close()


@pytest.fixture
def live(sim: KubeSim, store: PostgresEventStore) -> Iterator[Live]:
    harness = Live(sim, store)
    try:
        yield harness
    finally:
        harness.close()
