"""Job state and audit timeline: statuses, counts, goodput, timeline order, recreation."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from consumers.projector import Projector
from dlc_ledger.cli.app import app
from ledger.events import (
    AdmissionDecided,
    JobAdmitted,
    JobDeleted,
    JobFailed,
    JobPreempted,
    JobQueued,
    JobRestarted,
    JobStarted,
    JobStopped,
    JobSubmitted,
    JobSucceeded,
    NodeRegistered,
    OccupancyEnded,
    OccupancyStarted,
    PreemptionDecided,
    Victim,
)
from ledger.store.postgres import PostgresEventStore
from projections.jobs import job_detail
from projections.registry import all_projections
from tests.support.builders import Narrator, at, replica
from tests.support.clis import CliCall

ODD = 'exit 1\twith "quotes",\nnewline and \\ backslash {braces}'
ODD_POD = 'p,"s\\'


def _submit(n: Narrator, uid: str, name: str, t: float, **kw: object) -> None:
    n.tell(
        JobSubmitted(
            job_uid=uid,
            name=name,
            namespace="team-a",
            kind="PyTorchJob",
            framework="pytorch",
            workspace=str(kw.get("workspace", "ws-a")),
            quota="q-a",
            user=str(kw.get("user", "alice")),
            priority=5,
            billing_mode="public",
            replicas=(replica(), replica(mgpu=0).model_copy(update={"replica_type": "master"})),
        ),
        f"job/{uid}",
        at(t),
        source="api/alice",
    )


def _occupy(n: Narrator, uid: str, pod: str, start: float, end: float | None, **kw: object) -> None:
    n.tell(
        OccupancyStarted(
            occupancy_id=pod,
            job_uid=uid,
            pod_uid=pod,
            pod_name=f"{uid}-{pod}",
            node="node-1",
            flavor=str(kw.get("flavor", "gpu/A100")),
            mgpu=int(str(kw.get("mgpu", 1000))),
            cpu_milli=4000,
            memory_mib=8192,
            workspace="ws-a",
            started_at=at(start),
        ),
        f"job/{uid}",
        at(start),
    )
    if end is not None:
        n.tell(
            OccupancyEnded(
                occupancy_id=pod, job_uid=uid, pod_uid=pod, ended_at=at(end), reason="completed"
            ),
            f"job/{uid}",
            at(end),
        )


def _project(store: PostgresEventStore, n: Narrator) -> None:
    store.append(n.events)
    Projector(store, all_projections(), page_size=7).catch_up()


def test_lifecycle_counts_goodput_and_timeline(store: PostgresEventStore) -> None:
    n = Narrator()
    _submit(n, "u1", "train", 0)
    n.tell(JobQueued(job_uid="u1", reason="quota full"), "job/u1", at(10))
    n.tell(
        AdmissionDecided(job_uid="u1", quota="q-a", outcome="admit", borrowing=True),
        "quota/q-a",
        at(20),
        source="dispatcher",
    )
    n.tell(JobAdmitted(job_uid="u1", by="dispatcher"), "job/u1", at(20))
    _occupy(n, "u1", "p1", 30, 130)  # OccupancyStarted moves Admitted -> Running at 30
    n.tell(JobRestarted(job_uid="u1", reason="worker OOM"), "job/u1", at(130))
    _occupy(n, "u1", "p2", 140, 200)
    n.tell(
        PreemptionDecided(
            preemptor="u9",
            victims=(Victim(job_uid="u1", quota="q-a", reason="borrower"),),
            reason="reclaim guaranteed quota",
        ),
        "quota/q-a",
        at(200),
        source="dispatcher",
    )
    n.tell(JobPreempted(job_uid="u1", by="dispatcher", reason="reclaim"), "job/u1", at(200))
    _occupy(n, "u1", "p3", 300, 400, flavor="gpu/H100", mgpu=500)
    n.tell(JobSucceeded(job_uid="u1"), "job/u1", at(400))
    n.tell(JobDeleted(job_uid="u1", by="alice"), "job/u1", at(500))
    n.tell(NodeRegistered(node="node-1", gpus=8, cpu_milli=1, memory_mib=1), "node/node-1", at(0))
    _project(store, n)

    with store.snapshot() as uow:
        job = job_detail(uow, "u1")
    assert job["status"] == "Succeeded"
    assert (job["name"], job["namespace"], job["kind"], job["framework"]) == (
        "train",
        "team-a",
        "PyTorchJob",
        "pytorch",
    )
    assert (job["workspace"], job["quota"], job["user"], job["priority"]) == (
        "ws-a",
        "q-a",
        "alice",
        5,
    )
    assert [r["replica_type"] for r in job["replicas"]] == ["worker", "master"]
    assert job["restarts"] == 1 and job["preemptions"] == 1
    assert job["entered"] == {
        "Creating": "2026-11-01T00:00:00Z",
        "Queuing": "2026-11-01T00:00:10Z",
        "Admitted": "2026-11-01T00:00:20Z",
        "Running": "2026-11-01T00:00:30Z",
        "Restarting": "2026-11-01T00:02:10Z",
        "Preempted": "2026-11-01T00:03:20Z",
        "Succeeded": "2026-11-01T00:06:40Z",
    }
    assert job["ended_at"] == "2026-11-01T00:06:40Z"
    assert job["deleted_at"] == "2026-11-01T00:08:20Z"
    # running 30-130, 140-200, 300-400 = 260 s of a 400 s life
    assert job["running_seconds"] == 260
    assert job["goodput"] == 0.65
    assert job["occupied"] == [
        {
            "flavor": "gpu/A100",
            "mgpu_seconds": 160_000,
            "cpu_milli_seconds": 640_000,
            "memory_mib_seconds": 1_310_720,
            "occupancies": 2,
        },
        {
            "flavor": "gpu/H100",
            "mgpu_seconds": 50_000,
            "cpu_milli_seconds": 400_000,
            "memory_mib_seconds": 819_200,
            "occupancies": 1,
        },
    ]
    # every event about the job, node events excluded, in position order
    stored = [e for e in n.events if e.stream != "node/node-1"]
    timeline = job["timeline"]
    assert [t["event_id"] for t in timeline] == [str(e.event_id) for e in stored]
    assert [t["position"] for t in timeline] == sorted(t["position"] for t in timeline)
    assert [t["type"] for t in timeline][:4] == [
        "JobSubmitted",
        "JobQueued",
        "AdmissionDecided",
        "JobAdmitted",
    ]
    preempted = next(t for t in timeline if t["type"] == "PreemptionDecided")
    assert preempted["by"] == "u9" and preempted["reason"] == "borrower"
    assert "victim" in preempted["summary"]
    restarted = next(t for t in timeline if t["type"] == "JobRestarted")
    assert restarted["reason"] == "worker OOM" and "restarted" in restarted["summary"]
    deleted = timeline[-1]
    assert (deleted["type"], deleted["by"], deleted["source"]) == (
        "JobDeleted",
        "alice",
        "kube-watcher/test",
    )


def test_stop_waits_for_pods_and_failure_is_final(store: PostgresEventStore) -> None:
    n = Narrator()
    _submit(n, "s1", "stopper", 0)
    n.tell(JobStarted(job_uid="s1"), "job/s1", at(5))
    _occupy(n, "s1", ODD_POD, 5, None)
    n.tell(JobStopped(job_uid="s1", by="bob", reason="budget"), "job/s1", at(50))
    _submit(n, "f1", "failer", 0)
    n.tell(JobStarted(job_uid="f1"), "job/f1", at(5))
    n.tell(JobFailed(job_uid="f1", reason=ODD), "job/f1", at(25))
    n.tell(JobStarted(job_uid="f1"), "job/f1", at(30))  # late and stale: ignored
    store.append(n.events)
    projector = Projector(store, all_projections())
    projector.catch_up()
    with store.snapshot() as uow:
        assert job_detail(uow, "s1")["status"] == "Stopping"
        failed = job_detail(uow, "f1")
    assert failed["status"] == "Failed" and failed["running_seconds"] == 20
    assert failed["goodput"] == 0.8
    assert failed["timeline"][-1]["type"] == "JobStarted"
    assert failed["timeline"][-2]["reason"] == ODD  # COPY escaping round-trips

    more = Narrator("more")
    more.tell(
        OccupancyEnded(
            occupancy_id=ODD_POD, job_uid="s1", pod_uid=ODD_POD, ended_at=at(60), reason="deleted"
        ),
        "job/s1",
        at(60),
    )
    store.append(more.events)
    projector.catch_up()
    with store.snapshot() as uow:
        stopped = job_detail(uow, "s1")
    assert stopped["status"] == "Stopped" and stopped["status_since"] == "2026-11-01T00:01:00Z"
    assert stopped["entered"]["Stopping"] == "2026-11-01T00:00:50Z"
    assert stopped["running_seconds"] == 45


def test_same_name_recreated_is_a_separate_job(store: PostgresEventStore, cli: CliCall) -> None:
    n = Narrator()
    _submit(n, "old-uid", "nightly", 0)
    _occupy(n, "old-uid", "old-pod", 10, 110)
    n.tell(JobSucceeded(job_uid="old-uid"), "job/old-uid", at(110))
    n.tell(JobDeleted(job_uid="old-uid"), "job/old-uid", at(120))
    _submit(n, "new-uid", "nightly", 130)
    _occupy(n, "new-uid", "new-pod", 140, None, mgpu=2000)
    _project(store, n)

    with store.snapshot() as uow:
        old, new = job_detail(uow, "old-uid"), job_detail(uow, "new-uid")
    assert old["status"] == "Succeeded" and new["status"] == "Running"
    assert old["occupied"][0]["mgpu_seconds"] == 100_000 and new["occupied"] == []
    assert {t["type"] for t in new["timeline"]} == {"JobSubmitted", "OccupancyStarted"}
    at_200 = json.loads(
        cli(
            "report",
            "occupancy",
            "--at",
            "2026-11-01T00:03:20Z",
            "--group-by",
            "workspace,billing_mode",
            "--format",
            "json",
        )
    )
    assert at_200 == [
        {
            "workspace": "ws-a",
            "billing_mode": "public",
            "mgpu": 2000,
            "cpu_milli": 4000,
            "memory_mib": 8192,
            "jobs": 1,
        }
    ]
    # the name is ambiguous now; the uid is not
    assert "ambiguous" in cli("jobs", "show", "nightly", ok=False)
    shown = json.loads(cli("jobs", "show", "new-uid", "--format", "json"))
    assert shown["job_uid"] == "new-uid"
    table = cli("jobs", "show", "old-uid")
    assert "JobDeleted" in table and "timeline:" in table
    listed = json.loads(cli("jobs", "list", "--format", "json", "--status", "Running"))
    assert [j["job_uid"] for j in listed] == ["new-uid"]
    assert [j["job_uid"] for j in json.loads(cli("jobs", "list", "--format", "json"))] == [
        "new-uid",
        "old-uid",
    ]
    assert "old-uid" in cli("jobs", "list", "--user", "alice", "--limit", "5")
    assert "unknown status" in cli("jobs", "list", "--status", "Bogus", ok=False)


def test_a_job_naming_no_quota_belongs_to_its_workspace_binding_at_submission(
    store: PostgresEventStore,
) -> None:
    from ledger.events import WorkspaceBound

    n = Narrator()

    def submit(uid: str, t: float, quota: str | None = None) -> None:
        n.tell(
            JobSubmitted(job_uid=uid, name=uid, workspace="ws-a", quota=quota),
            f"job/{uid}",
            at(t),
        )

    n.tell(WorkspaceBound(workspace="ws-a", quota="q-1"), "workspace/ws-a", at(0))
    submit("j1", 1)
    submit("j2", 2, quota="explicit")
    n.tell(WorkspaceBound(workspace="ws-a", quota="q-2"), "workspace/ws-a", at(3))
    submit("j3", 4)
    n.tell(WorkspaceBound(workspace="ws-a", quota=None), "workspace/ws-a", at(5))
    submit("j4", 6)
    for event in n.events:  # one page per event: the binding must survive between pages
        store.append([event])
    Projector(store, all_projections(), page_size=1).catch_up()
    with store.snapshot() as uow:
        quotas = {uid: job_detail(uow, uid)["quota"] for uid in ("j1", "j2", "j3", "j4")}
    assert quotas == {"j1": "q-1", "j2": "explicit", "j3": "q-2", "j4": None}


def test_list_pages_with_a_cursor_and_reads_status_at_an_instant(
    store: PostgresEventStore, cli: CliCall
) -> None:
    n = Narrator()
    for i in range(7):
        _submit(n, f"u{i}", f"job-{i}", i * 100)
        _occupy(n, f"u{i}", f"p{i}", i * 100 + 10, i * 100 + 60)
        n.tell(JobSucceeded(job_uid=f"u{i}"), f"job/u{i}", at(i * 100 + 60))
    _project(store, n)

    seen: list[str] = []
    cursor: list[str] = []
    runner_pages = 0
    while True:  # the next page's cursor goes to stderr
        result = CliRunner().invoke(
            app, ["jobs", "list", "--format", "json", "--limit", "3", *cursor]
        )
        assert result.exit_code == 0, result.output
        seen += [j["job_uid"] for j in json.loads(result.stdout)]
        runner_pages += 1
        more = [line for line in result.stderr.splitlines() if line.startswith("more: ")]
        if not more:
            break
        cursor = more[0].removeprefix("more: ").split()
    assert seen == [f"u{i}" for i in reversed(range(7))] and runner_pages == 3

    # at 00:05:30 (330 s) job-3 is running (since 310 s), jobs 4-6 not yet submitted
    at_530 = json.loads(cli("jobs", "list", "--format", "json", "--at", "2026-11-01T00:05:30Z"))
    assert [j["job_uid"] for j in at_530] == ["u3", "u2", "u1", "u0"]
    three = at_530[0]
    assert (three["status"], three["status_since"]) == ("Running", "2026-11-01T00:05:10Z")
    assert three["ended_at"] is None and three["running_seconds"] == 20
    assert at_530[1]["status"] == "Succeeded" and at_530[1]["running_seconds"] == 50
    running = json.loads(
        cli(
            "jobs",
            "list",
            "--format",
            "json",
            "--at",
            "2026-11-01T00:05:30Z",
            "--status",
            "Running",
        )
    )
    assert [j["job_uid"] for j in running] == ["u3"]
    assert "invalid cursor" in cli("jobs", "list", "--cursor", "nope!", ok=False)
    assert "--limit" in cli("jobs", "list", "--limit", "100000000", ok=False)


def test_a_submission_naming_no_quota_shows_the_binding_it_was_resolved_to(
    store: PostgresEventStore,
) -> None:
    from ledger.events import WorkspaceBound

    n = Narrator()
    n.tell(WorkspaceBound(workspace="ws-a", quota="be"), "workspace/ws-a", at(0))
    n.tell(JobSubmitted(job_uid="b1", name="b1", workspace="ws-a"), "job/b1", at(1))
    n.tell(JobSubmitted(job_uid="b2", name="b2", workspace="ws-z"), "job/b2", at(1))
    _project(store, n)
    with store.snapshot() as uow:
        (bound,) = job_detail(uow, "b1")["timeline"]
        (unbound,) = job_detail(uow, "b2")["timeline"]
    assert "(quota be by workspace binding, public" in bound["summary"]
    assert "(quota none, public" in unbound["summary"]
