"""Trace loading follows the fixed mapping of DESIGN §8 (DLRM: one service per app, one
replica per instance), and ``openb+dlrm`` puts both on one cluster from one epoch."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from kubesim.driver import plan_services
from kubesim.traces import Trace, combine, load_dlrm, load_openb, load_trace


@pytest.fixture(scope="module")
def openb() -> Trace:
    return load_openb()


@pytest.fixture(scope="module")
def dlrm() -> Trace:
    return load_dlrm()


def test_openb_counts_and_mapping(openb: Trace) -> None:
    assert len(openb.instances) == 8152
    assert len(openb.nodes) == 1523
    assert sum(i.scheduled is not None for i in openb.instances) == 7255
    assert sum(i.scheduled is None for i in openb.instances) == 897
    assert sum(i.failed for i in openb.instances) == 1870
    assert openb.end == 12902960
    assert Counter(i.workspace for i in openb.instances) == {
        "ws-ls": 4647,
        "ws-be": 3398,
        "ws-burstable": 100,
        "ws-guaranteed": 7,
    }
    modes = Counter((i.workspace, i.billing_mode) for i in openb.instances)
    assert modes[("ws-be", "idle")] == 3398 and modes[("ws-ls", "public")] == 4647
    by_name = {i.source_name: i for i in openb.instances}
    shared = by_name["openb-pod-0001"]
    assert (shared.gpu_milli, shared.gpus, shared.cpu_milli, shared.memory_mib) == (
        460,
        1,
        6000,
        12288,
    )
    assert (shared.created, shared.scheduled, shared.deleted) == (427061, 427061, 12902960)
    multi = next(i for i in openb.instances if i.gpus == 8)
    assert multi.gpu_milli == 8000
    assert Counter(n.gpu_model for n in openb.nodes)["G2"] == 549


def test_dlrm_counts_rounding_and_open_ends(dlrm: Trace) -> None:
    assert len(dlrm.instances) == 23871
    assert len({i.workspace for i in dlrm.instances}) == 156
    before = [i for i in dlrm.instances if i.pre_existing]
    assert len(before) == 7280
    assert all(i.created == 0 and i.scheduled == 0 for i in before)
    never_deleted = [i for i in dlrm.instances if i.deleted is None]
    assert len(never_deleted) == 8878
    assert sum(i.pre_existing and i.deleted is None for i in dlrm.instances) == 4677
    assert dlrm.end == 2677541
    assert all(i.billing_mode == "public" for i in dlrm.instances)
    first = dlrm.instances[0]
    assert (first.job_name, first.workspace, first.namespace) == ("instance-0", "app_0", "app-0")
    assert (first.gpu_milli, first.cpu_milli, first.memory_mib) == (1000, 12000, 120 * 1024)
    # the file's float noise (e.g. 475.00000000000006) rounds to whole seconds
    assert any(i.created == 475 for i in dlrm.instances)
    assert all(isinstance(i.created, int) for i in dlrm.instances)
    assert {n.name[:8] for n in dlrm.nodes} == {"dlrm-gpu", "dlrm-cpu"}


def test_dlrm_apps_are_services_and_instances_their_replicas(dlrm: Trace) -> None:
    assert {(i.namespace, i.service) for i in dlrm.instances} == {
        (i.namespace, i.namespace) for i in dlrm.instances
    }
    assert len({i.service for i in dlrm.instances}) == 156
    assert [i.replica for i in dlrm.instances] == list(range(23871))  # the row's number
    plans = plan_services(dlrm)
    assert len(plans) == 156
    # the Deployments hold the instances older than the trace at second 0
    assert sum(p.replicas for p in plans.values() if p.created == 0) >= 7280
    assert all(
        p.created == min(i.created for i in dlrm.instances if i.namespace == ns)
        for (ns, _), p in plans.items()
    )


def test_openb_and_dlrm_on_one_cluster_from_one_epoch(openb: Trace, dlrm: Trace) -> None:
    both = load_trace("openb+dlrm")
    assert both.name == "openb+dlrm" and both.epoch == openb.epoch == dlrm.epoch
    assert len(both.instances) == 8152 + 23871
    assert len(both.nodes) == len(openb.nodes) + len(dlrm.nodes)
    assert both.end == max(openb.end, dlrm.end)
    assert sum(i.service is None for i in both.instances) == 8152  # training: jobs
    later = datetime(2027, 1, 1, tzinfo=UTC)
    assert load_trace("openb+dlrm", later).epoch == later
    with pytest.raises(ValueError, match="one epoch"):
        combine("x", openb, replace(dlrm, epoch=later))
    with pytest.raises(ValueError, match="same job twice"):
        combine("x", dlrm, replace(dlrm, nodes=()))
    with pytest.raises(ValueError, match="unknown trace"):
        load_trace("dlrm+openb")
