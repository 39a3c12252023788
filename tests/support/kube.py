"""Fixtures: a running kubesim and the official `kubernetes` client pointed at it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from kubesim import BATCH_JOBS, PODS, KubeSim
from kubesim.objects import bind_pod, job_object, pod_object
from kubesim.store import Object


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    # Bookmarks every 50 ms and watch timeouts scaled by 0.1 keep the suite free of sleeps.
    with KubeSim(bookmark_interval=0.05, timeout_scale=0.1) as server:
        yield server


@pytest.fixture
def api(sim: KubeSim) -> client.ApiClient:
    return client.ApiClient(client.Configuration(host=sim.url))


@pytest.fixture
def v1(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


def make_job(
    sim: KubeSim, name: str, namespace: str = "ns1", labels: dict[str, str] | None = None
) -> Object:
    job = job_object(
        name,
        namespace,
        labels=labels or {"dlc.ledger/workspace": "ws-a"},
        annotations={},
        cpu_milli=1000,
        memory_mib=512,
        gpus=1,
        priority=0,
    )
    return sim.cluster.create(BATCH_JOBS, job)


def make_pod(sim: KubeSim, job: Object, name: str, node: str | None = None) -> Object:
    pod = sim.cluster.create(PODS, pod_object(name, job, sim.clock.timestamp()))
    if node is not None:
        now = sim.clock.timestamp()
        ns = pod["metadata"]["namespace"]
        pod = sim.cluster.update(PODS, ns, name, lambda p: bind_pod(p, node, now))
    return pod
