"""History then live on one cluster: ``ClosedLoopDriver(open_until=...)`` plays the rows
created before the instant as the open loop does (no dispatcher needed), and the rows
created from it on arrive suspended and run only once resumed; ``live_rows`` builds the
live period from a copy of real rows."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from kubesim import KubeSim
from kubesim.clock import DEFAULT_EPOCH
from kubesim.closed_loop import ClosedLoopDriver
from kubesim.traces import Trace, TraceInstance, TraceNode, live_rows, load_openb

NODES = (TraceNode("gpu-0", 8, 96_000, 786_432, "V100"),)


def _row(name: str, created: int, scheduled: int | None, deleted: int | None) -> TraceInstance:
    return TraceInstance(
        job_name=name,
        source_name=name,
        namespace="ws-ls",
        workspace="ws-ls",
        billing_mode="public",
        user="openb",
        priority=200,
        cpu_milli=4000,
        memory_mib=8192,
        gpu_milli=1000,
        gpus=1,
        created=created,
        scheduled=scheduled,
        deleted=deleted,
    )


ROWS = (
    _row("h1", 0, 10, 200),  # history, still running at the live instant
    _row("h2", 5, 5, 50),  # history, over before it
    _row("h3", 20, None, 60),  # history, never scheduled
    _row("h4", 30, 150, 300),  # history, created before the live instant, bound after it
    _row("l1", 100, 100, 160),  # live: runs 60 s once resumed
    _row("l2", 120, None, 140),  # live, never run by the trace: withdrawn at 140
)
OPEN_UNTIL = 100


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim(bookmark_interval=0.05, timeout_scale=0.1) as server:
        yield server


@pytest.fixture
def api(sim: KubeSim) -> client.ApiClient:
    return client.ApiClient(client.Configuration(host=sim.url))


def _pods(api: client.ApiClient, job: str) -> list[client.V1Pod]:
    pods = client.CoreV1Api(api).list_namespaced_pod("ws-ls", label_selector=f"job-name={job}")
    return list(pods.items)


def _job(api: client.ApiClient, name: str) -> client.V1Job:
    return client.BatchV1Api(api).read_namespaced_job(name, "ws-ls")


def _suspend(api: client.ApiClient, job: str, value: bool) -> None:
    client.BatchV1Api(api).patch_namespaced_job(job, "ws-ls", {"spec": {"suspend": value}})


def _conditions(job: client.V1Job) -> dict[str, str]:
    return {c.type: c.status for c in job.status.conditions or ()}


def test_history_plays_open_loop_and_live_rows_wait_for_a_dispatcher(
    sim: KubeSim, api: client.ApiClient
) -> None:
    trace = Trace("t", DEFAULT_EPOCH, NODES, ROWS, 300)
    driver = ClosedLoopDriver(sim, trace, end=300, open_until=OPEN_UNTIL)
    assert set(driver.runs) == {("ws-ls", "l1"), ("ws-ls", "l2")}  # the live rows only
    assert [i.job_name for i in driver.history().instances] == ["h1", "h2", "h3", "h4"]

    driver.play_history()  # no dispatcher: the history binds at the trace's seconds
    assert driver.next_time() == OPEN_UNTIL and sim.clock.seconds() == 60
    (h1,) = _pods(api, "h1")
    assert h1.status.phase == "Running" and h1.spec.node_name == "gpu-0"
    assert h1.status.start_time.isoformat() == "2026-11-01T00:00:10+00:00"
    assert _job(api, "h1").spec.suspend is False
    assert _pods(api, "h2") == [] and _conditions(_job(api, "h2"))["Complete"] == "True"
    with pytest.raises(client.ApiException):
        _job(api, "h3")  # never scheduled: deleted with its job, as the open loop does
    (h4,) = _pods(api, "h4")
    assert h4.status.phase == "Pending" and not h4.spec.node_name

    driver.run_until(OPEN_UNTIL)  # the live part: l1 arrives suspended
    l1 = _job(api, "l1")
    assert l1.spec.suspend is True and _conditions(l1) == {"Suspended": "True"}
    assert _pods(api, "l1") == []
    driver.run_until(149)
    assert _pods(api, "l1") == []  # nothing runs a live row without a dispatcher
    assert driver.runs[("ws-ls", "l2")].ended == "Withdrawn"
    driver.run_until(150)  # h4 binds at its trace second, no dispatcher involved
    (h4,) = _pods(api, "h4")
    assert h4.status.phase == "Running"
    assert h4.status.start_time.isoformat() == "2026-11-01T00:02:30+00:00"

    _suspend(api, "l1", False)  # the dispatcher admits l1 at 150: it runs 60 s
    (l1_pod,) = _pods(api, "l1")
    assert l1_pod.status.phase == "Running"
    driver.run_until(200)  # h1 ends at its trace deletion
    assert _pods(api, "h1") == [] and _conditions(_job(api, "h1"))["Complete"] == "True"
    driver.run_until(210)
    assert driver.runs[("ws-ls", "l1")].ended == "Succeeded"
    assert not driver.finished  # h4's deletion (300) is still to come
    driver.run_until(300)
    assert _pods(api, "h4") == [] and driver.finished and driver.done.is_set()


def test_a_history_row_preempted_in_the_live_part_resumes_and_ends_at_its_deletion(
    sim: KubeSim, api: client.ApiClient
) -> None:
    trace = Trace("t", DEFAULT_EPOCH, NODES, (ROWS[0], ROWS[4]), 300)
    driver = ClosedLoopDriver(sim, trace, end=300, open_until=OPEN_UNTIL)
    driver.play_history()
    driver.run_until(120)
    _suspend(api, "h1", True)  # the dispatcher preempts the history row
    assert _pods(api, "h1")[0].metadata.deletion_timestamp is not None
    driver.run_until(150)
    assert _pods(api, "h1") == []
    _suspend(api, "h1", False)  # admitted again: bound at once, its row still runs
    (pod,) = _pods(api, "h1")
    assert pod.status.phase == "Running" and pod.spec.node_name == "gpu-0"
    assert driver.runs[("ws-ls", "l1")].starts == 0  # a history row is no closed-loop run
    driver.run_until(200)  # it ends at its trace deletion
    assert _pods(api, "h1") == [] and _conditions(_job(api, "h1"))["Complete"] == "True"


def test_without_open_until_every_row_arrives_suspended(
    sim: KubeSim, api: client.ApiClient
) -> None:
    driver = ClosedLoopDriver(sim, Trace("t", DEFAULT_EPOCH, NODES, ROWS[:1], 300))
    driver.play_history()  # nothing to play
    assert set(driver.runs) == {("ws-ls", "h1")} and driver.history().instances == ()
    assert _job(api, "h1").spec.suspend is True


def test_live_rows_copies_a_window_after_the_trace() -> None:
    trace = Trace("t", DEFAULT_EPOCH, NODES, (*ROWS[:4], _row("h5", 40, 45, None)), 300)
    live = live_rows(trace, (20, 50), suffix="-live")
    assert live.instances[:5] == trace.instances and live.name == "t"
    copies = {i.job_name: i for i in live.instances[5:]}
    assert set(copies) == {"h3-live", "h4-live", "h5-live"}  # created in [20, 50)
    at = 3600  # the first full hour after the trace's end (300)
    assert (copies["h3-live"].created, copies["h3-live"].scheduled) == (at, None)
    assert copies["h3-live"].deleted == at + 40
    assert (copies["h4-live"].created, copies["h4-live"].scheduled) == (at + 10, at + 130)
    assert copies["h4-live"].deleted == at + 280
    # never ended in the trace: ends after what it ran there (45 to the end, 300)
    assert (copies["h5-live"].scheduled, copies["h5-live"].deleted) == (at + 25, at + 280)
    assert copies["h5-live"].source_name == "h5" and live.end == at + 280
    with pytest.raises(ValueError):
        live_rows(trace, (20, 50), at=40)  # not after the trace's creations
    with pytest.raises(ValueError):
        live_rows(live, (20, 50), at=10_000, suffix="-live")  # the names are taken


def test_live_rows_of_openb_keep_each_copy_s_times_and_resources() -> None:
    openb = load_openb()
    end = openb.end
    live = live_rows(openb, (end - 3600, end))
    copies = live.instances[len(openb.instances) :]
    originals = [i for i in openb.instances if end - 3600 <= i.created < end]
    assert len(copies) == len(originals) > 0
    at = (end // 3600 + 1) * 3600
    for copy, row in zip(copies, originals, strict=True):
        assert copy.job_name == row.job_name + "-live" and copy.created == row.created + at - (
            end - 3600
        )
        assert (copy.gpu_milli, copy.workspace, copy.priority) == (
            row.gpu_milli,
            row.workspace,
            row.priority,
        )
