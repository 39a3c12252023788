"""kubesim's closed-loop mode through the official client: jobs arrive suspended, run only
once resumed, lose their work when suspended again, end as the trace says."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from kubesim import KubeSim
from kubesim.clock import DEFAULT_EPOCH
from kubesim.closed_loop import ClosedLoopDriver
from kubesim.traces import Trace, TraceInstance, TraceNode

NODES = (TraceNode("gpu-0", 8, 96_000, 786_432, "V100"),)


def _row(
    name: str, created: int, scheduled: int | None, deleted: int | None, **kw: object
) -> TraceInstance:
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
        **kw,  # type: ignore[arg-type]
    )


ROWS = (
    _row("a", 0, 10, 110),  # runs 100 s
    _row("b", 5, 5, 55, failed=True),  # runs 50 s, fails
    _row("c", 5, None, 40),  # never scheduled: withdrawn at 40
    _row("d", 0, 0, 30, pre_existing=True),  # running before the trace: adopted
)


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim(bookmark_interval=0.05, timeout_scale=0.1) as server:
        yield server


@pytest.fixture
def batch(sim: KubeSim) -> client.BatchV1Api:
    return client.BatchV1Api(client.ApiClient(client.Configuration(host=sim.url)))


@pytest.fixture
def core(sim: KubeSim) -> client.CoreV1Api:
    return client.CoreV1Api(client.ApiClient(client.Configuration(host=sim.url)))


def _pods(core: client.CoreV1Api, job: str) -> list[client.V1Pod]:
    return list(
        core.list_namespaced_pod("ws-ls", label_selector=f"job-name={job}").items  # type: ignore[union-attr]
    )


def _suspend(batch: client.BatchV1Api, job: str, value: bool) -> None:
    batch.patch_namespaced_job(job, "ws-ls", {"spec": {"suspend": value}})


def test_jobs_arrive_suspended_and_run_their_length_once_resumed(
    sim: KubeSim, batch: client.BatchV1Api, core: client.CoreV1Api
) -> None:
    driver = ClosedLoopDriver(sim, Trace("t", DEFAULT_EPOCH, NODES, ROWS, 1_000))
    assert driver.end == 110  # the slice's own end, not the file's
    job = batch.read_namespaced_job("a", "ws-ls")
    assert job.spec.suspend is True
    assert [(c.type, c.status) for c in job.status.conditions] == [("Suspended", "True")]
    assert _pods(core, "a") == []
    # pre-existing: adopted, running from second 0
    assert [p.status.phase for p in _pods(core, "d")] == ["Running"]
    assert driver.next_instant() == 5

    driver.run_until(20)  # b and c arrived; nothing runs without a dispatcher
    assert _pods(core, "b") == [] and sim.clock.seconds() == 20
    _suspend(batch, "a", False)
    (pod,) = _pods(core, "a")
    assert pod.spec.node_name == "gpu-0" and pod.status.phase == "Running"
    assert pod.status.start_time.isoformat() == "2026-11-01T00:00:20+00:00"
    assert driver.next_instant() == 30  # d's run ends

    driver.run_until(40)
    assert driver.runs[("ws-ls", "d")].ended == "Succeeded"
    assert driver.runs[("ws-ls", "c")].ended == "Withdrawn"
    with pytest.raises(client.ApiException):
        batch.read_namespaced_job("c", "ws-ls")

    # preempted at 60: the pod goes after its grace period, the work is lost
    driver.run_until(60)
    _suspend(batch, "a", True)
    assert _pods(core, "a")[0].metadata.deletion_timestamp is not None
    driver.run_until(95)
    assert _pods(core, "a") == []
    assert driver.next_instant() == 120  # the lost run's timer: it fires and finds no pod
    driver.run_until(100)
    _suspend(batch, "a", False)
    driver.run_until(199)
    assert [p.status.phase for p in _pods(core, "a")] == ["Running"]
    driver.run_until(200)  # a: the full 100 s again from 100
    assert driver.runs[("ws-ls", "a")].ended == "Succeeded"
    job = batch.read_namespaced_job("a", "ws-ls")
    assert {c.type: c.status for c in job.status.conditions}["Complete"] == "True"
    assert driver.runs[("ws-ls", "a")].starts == 2
    assert driver.runs[("ws-ls", "a")].preemptions == 1
    assert not driver.finished and driver.unfinished() == ["ws-ls/b"]
    _suspend(batch, "b", False)

    driver.run_until(249)
    assert not driver.finished
    driver.run_until(250)  # b: 50 s from 200, failed as in the trace
    assert driver.finished and driver.done.is_set()
    job = batch.read_namespaced_job("b", "ws-ls")
    assert {c.type: c.status for c in job.status.conditions}["Failed"] == "True"
    assert driver.runs[("ws-ls", "b")].ended == "Failed"


def test_lockstep_driver_refuses_to_run_on_its_own(sim: KubeSim) -> None:
    driver = ClosedLoopDriver(sim, Trace("t", DEFAULT_EPOCH, NODES, ROWS[:1], 1_000))
    with pytest.raises(RuntimeError):
        driver.run()
    driver.run_until(10_000)
    assert not driver.finished  # never resumed: never ends by itself
    assert driver.next_instant() is None


def test_an_idle_victim_deleted_at_once_runs_its_full_length_after_resume(
    sim: KubeSim, batch: client.BatchV1Api, core: client.CoreV1Api
) -> None:
    driver = ClosedLoopDriver(sim, Trace("t", DEFAULT_EPOCH, NODES, ROWS[:1], 1_000))
    _suspend(batch, "a", False)
    driver.run_until(50)
    (pod,) = _pods(core, "a")
    # the dispatcher's idle-mode eviction: pods deleted at once, then the job suspended
    core.delete_namespaced_pod(pod.metadata.name, "ws-ls", grace_period_seconds=0)
    _suspend(batch, "a", True)
    assert _pods(core, "a") == []
    driver.run_until(150)  # the first run's end passes: nothing finishes
    assert driver.runs[("ws-ls", "a")].ended is None
    _suspend(batch, "a", False)
    driver.run_until(249)
    assert not driver.finished
    driver.run_until(250)
    assert driver.finished and driver.runs[("ws-ls", "a")].starts == 2


def test_a_job_stopped_at_its_maximum_run_time_ends_and_is_not_queued_again(
    sim: KubeSim, batch: client.BatchV1Api, core: client.CoreV1Api
) -> None:
    # e runs 100 s in the trace but declares a maximum of 30 s
    row = _row("e", 0, 10, 110, annotations=(("dlc.ledger/max-run-seconds", "30"),))
    driver = ClosedLoopDriver(sim, Trace("t", DEFAULT_EPOCH, NODES, (row,), 1_000))
    assert (
        batch.read_namespaced_job("e", "ws-ls").metadata.annotations["dlc.ledger/max-run-seconds"]
        == "30"
    )
    driver.run_until(20)
    _suspend(batch, "e", False)
    # the lockstep loop wakes at the maximum (20 + 30), before the run's own end (120)
    assert driver.next_instant() == 50
    driver.run_until(50)
    assert driver.runs[("ws-ls", "e")].ended is None  # nothing stops it but the dispatcher
    # the dispatcher's stop: the platform's timeout, which the job has already reached
    batch.patch_namespaced_job("e", "ws-ls", {"spec": {"activeDeadlineSeconds": 30}})
    run = driver.runs[("ws-ls", "e")]
    assert (run.ended, run.timed_out, run.ended_at) == ("Failed", True, 50)
    assert driver.finished
    job = batch.read_namespaced_job("e", "ws-ls")
    failed = next(c for c in job.status.conditions if c.type == "Failed")
    assert (failed.status, failed.reason) == ("True", "DeadlineExceeded")
    assert job.spec.suspend is False  # ended, not suspended: never queued again
    (pod,) = _pods(core, "e")
    assert pod.metadata.deletion_timestamp is not None  # its grace period
    driver.run_until(200)  # past the grace period and the run's own end
    assert _pods(core, "e") == [] and run.ended == "Failed" and run.starts == 1


def test_a_deadline_set_before_it_is_reached_fails_the_job_then(
    sim: KubeSim, batch: client.BatchV1Api
) -> None:
    rows = (_row("f", 0, 0, 100), _row("g", 0, 0, 100))
    driver = ClosedLoopDriver(sim, Trace("t", DEFAULT_EPOCH, NODES, rows, 1_000))
    _suspend(batch, "f", False)
    _suspend(batch, "g", False)
    driver.run_until(10)
    for name in ("f", "g"):
        batch.patch_namespaced_job(name, "ws-ls", {"spec": {"activeDeadlineSeconds": 40}})
    assert driver.runs[("ws-ls", "f")].ended is None
    driver.run_until(20)
    _suspend(batch, "g", True)  # g is preempted: its deadline's clock stops
    driver.run_until(30)
    _suspend(batch, "g", False)  # and starts again at its resume
    driver.run_until(39)
    assert driver.runs[("ws-ls", "f")].ended is None
    driver.run_until(40)  # f: 40 s from its start at 0
    assert driver.runs[("ws-ls", "f")].timed_out
    assert driver.runs[("ws-ls", "g")].ended is None
    driver.run_until(69)
    assert driver.runs[("ws-ls", "g")].ended is None
    driver.run_until(70)  # g: 40 s from its resume at 30
    assert driver.runs[("ws-ls", "g")].timed_out and driver.finished
