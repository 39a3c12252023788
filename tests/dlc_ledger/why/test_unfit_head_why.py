"""``jobs why`` on a job that can never fit at the head of a FIFO queue, through the real
CLI on projected state: with ``on_unfit_head: Retry`` (the default, the platform's rule)
it holds its queue and both it and the jobs behind it say so; with ``Skip`` the queue
passes it.

The tree: ``root`` (8 GPUs) over ``team-a`` (FIFO, the default Retry) and ``team-b``
(FIFO, ``on_unfit_head: Skip``), 4 GPUs each and capped there; each has a 2-GPU job
running, then a 6-GPU job (never fits) queued before a 1-GPU one (fits now).
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from consumers.projector import Projector
from dlc_ledger.services.quotas import apply_quota_file
from ledger.dispatch import Admitted, CycleInput, Incoming, QueueSettings, QuotaNode
from ledger.dispatch.estimates import estimate_starts
from ledger.events import (
    JobAdmitted,
    JobQueued,
    JobSubmitted,
    OccupancyStarted,
    ReplicaSpec,
)
from ledger.store.postgres import PostgresEventStore
from projections.registry import all_projections
from tests.support.builders import EPOCH, Narrator, at
from tests.support.clis import CliCall

TREE = """
quotas:
  - name: root
    min: {gpu/any: 8000}
  - name: team-a
    parent: root
    min: {gpu/any: 4000}
    max: {gpu/any: 4000}
    queue_policy: FIFO
    workspaces: [ws-a]
  - name: team-b
    parent: root
    min: {gpu/any: 4000}
    max: {gpu/any: 4000}
    queue_policy: FIFO
    on_unfit_head: Skip
    workspaces: [ws-b]
"""


def _submit(n: Narrator, uid: str, queued: float, mgpu: int, ws: str) -> None:
    n.tell(
        JobSubmitted(
            job_uid=uid,
            name=f"job-{uid}",
            namespace="ns",
            workspace=ws,
            priority=3,
            replicas=(ReplicaSpec(mgpu=mgpu, cpu_milli=0, memory_mib=0),),
        ),
        f"job/{uid}",
        at(queued),
    )
    n.tell(JobQueued(job_uid=uid), f"job/{uid}", at(queued))


def _run(n: Narrator, uid: str, start: float, mgpu: int, ws: str) -> None:
    n.tell(JobAdmitted(job_uid=uid, by="dispatcher"), f"job/{uid}", at(start))
    n.tell(
        OccupancyStarted(
            occupancy_id=f"pod-{uid}",
            job_uid=uid,
            pod_uid=f"pod-{uid}",
            node="n1",
            mgpu=mgpu,
            cpu_milli=0,
            memory_mib=0,
            workspace=ws,
            started_at=at(start),
        ),
        f"job/{uid}",
        at(start),
    )


@pytest.fixture
def queues(store: PostgresEventStore) -> None:
    apply_quota_file(store, TREE, principal="api/test", at=EPOCH)
    n = Narrator()
    for team, ws in (("a", "ws-a"), ("b", "ws-b")):
        _submit(n, f"run-{team}", 0, 2000, ws)
        _run(n, f"run-{team}", 100, 2000, ws)
        _submit(n, f"huge-{team}", 200, 6000, ws)
        _submit(n, f"small-{team}", 300, 1000, ws)
    store.append(n.events)
    Projector(store, all_projections()).catch_up()


def _pending(cli: CliCall, job: str) -> dict[str, object]:
    doc = json.loads(cli("jobs", "why", job, "--format", "json"))
    assert doc["answer"] == "pending", doc
    pending: dict[str, object] = doc["pending"]
    return pending


def test_a_head_that_never_fits_says_it_holds_its_queue(queues: None, cli: CliCall) -> None:
    head = _pending(cli, "job-huge-a")
    assert (head["reason"], head["position"]) == ("ExceedsMaxQuota", 1)
    text = str(head["reason_text"])
    assert "can never fit" in text
    assert "FIFO queue retries it at its head and never skips it (on_unfit_head: Retry)" in text
    assert "the 1 job(s) behind it wait" in text and "on_unfit_head: Skip" in text
    table = cli("jobs", "why", "job-huge-a")
    assert "why pending: ExceedsMaxQuota" in table and "on_unfit_head: Retry" in table


def test_a_job_behind_it_says_what_holds_it(queues: None, cli: CliCall) -> None:
    behind = _pending(cli, "job-small-a")
    # 1 GPU would fit now (2 of 4 used), but the queue is held at its head
    assert (behind["reason"], behind["position"]) == ("WaitingForQuota", 2)
    text = str(behind["reason_text"])
    assert text.startswith("it is never tried: job-huge-a (huge-a)")
    assert "can never fit as configured (ExceedsMaxQuota)" in text
    assert "(on_unfit_head: Retry)" in text
    rows = json.loads(cli("queue", "show", "team-a", "--format", "json"))
    assert [(r["job_uid"], r["position"], r["reason"]) for r in rows] == [
        ("huge-a", 1, "ExceedsMaxQuota"),
        ("small-a", 2, "WaitingForQuota"),
    ]
    # the listing estimates both: the held job is not shown starting "now" past its head
    assert [(r["estimated_start"], r["estimate_basis"]) for r in rows] == [
        (None, "never"),
        (None, "unknown"),
    ]


def test_an_estimate_keeps_a_retried_head_in_the_simulation() -> None:
    # plain data: the head never fits, the job behind would fit now; asked about together
    # (as a queue listing asks) or alone, the job behind never starts while the head holds
    quotas = (QuotaNode("root", min={"gpu": 8}), QuotaNode("a", "root", {"gpu": 4}, {"gpu": 4}))
    busy = (Admitted("run", "a", 0, {"gpu": 2}, EPOCH),)
    pending = (
        Incoming("huge", "a", 0, {"gpu": 6}, EPOCH),
        Incoming("small", "a", 0, {"gpu": 1}, EPOCH + timedelta(minutes=1)),
    )
    ends = {"run": EPOCH + timedelta(hours=1)}
    runs = {p.job: timedelta(hours=1) for p in pending}
    for unfit, small in (("Retry", None), ("Skip", EPOCH + timedelta(minutes=5))):
        queues = {"a": QueueSettings("FIFO", on_unfit_head=unfit)}  # type: ignore[arg-type]
        cycle = CycleInput(quotas, busy, pending, EPOCH + timedelta(minutes=5), queues)
        both = estimate_starts(cycle, ends, runs)
        alone = estimate_starts(cycle, ends, runs, jobs=["small"])
        assert (both["huge"].start, both["huge"].basis) == (None, "never")
        assert both["small"].start == alone["small"].start == small, unfit


def test_with_skip_the_queue_passes_it(queues: None, cli: CliCall) -> None:
    head = _pending(cli, "job-huge-b")
    assert head["reason"] == "ExceedsMaxQuota"
    assert "on_unfit_head" not in str(head["reason_text"])
    small = _pending(cli, "job-small-b")
    assert small["reason"] is None  # fits now: the dispatcher admits it at its next cycle
    rows = json.loads(cli("queue", "show", "team-b", "--format", "json"))
    assert [(r["job_uid"], r["reason"]) for r in rows] == [("huge-b", "ExceedsMaxQuota")]
