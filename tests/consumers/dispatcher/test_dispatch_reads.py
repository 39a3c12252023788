"""dispatch_input: the cycle's input read from projected job state, bindings, the tree
and the decisions already taken (real PostgreSQL, the real projector)."""

from __future__ import annotations

from consumers.projector import Projector
from dlc_ledger.services.quotas import apply_quota_file
from ledger.events import (
    AdmissionDecided,
    JobAdmitted,
    JobDeleted,
    JobPreempted,
    JobQueued,
    JobSubmitted,
    OccupancyEnded,
    OccupancyStarted,
    PreemptionDecided,
    ReplicaSpec,
    Victim,
    WorkloadCreated,
    WorkloadScaled,
)
from ledger.store.postgres import PostgresEventStore
from projections.dispatch.reads import dispatch_input, read_dispatch
from projections.registry import all_projections
from tests.support.builders import EPOCH, Narrator, at

TREE = """
quotas:
  - name: root
    min: {gpu/A100: 2000, gpu/any: 6000, cpu: 64000}
  - name: team-a
    parent: root
    min: {gpu/any: 4000, cpu: 32000}
    queue_policy: StrictFIFO
    workspaces: [ws-a]
  - name: team-b
    parent: root
    min: {gpu/A100: 2000, gpu/any: 2000, cpu: 32000}
    workspaces: [ws-b]
"""


def _submit(n: Narrator, uid: str, t: float, **kw: object) -> None:
    n.tell(
        JobSubmitted(
            job_uid=uid,
            name=f"job-{uid}",
            namespace="ns",
            kind=str(kw.get("kind", "Job")),
            workspace=str(kw.get("workspace", "ws-a")),
            quota=kw.get("quota"),
            priority=int(str(kw.get("priority", 3))),
            billing_mode=kw.get("billing_mode", "public"),
            replicas=(
                ReplicaSpec(
                    count=2,
                    flavor=str(kw.get("flavor", "gpu/any")),
                    mgpu=1000,
                    cpu_milli=4000,
                    memory_mib=8192,
                ),
            ),
        ),
        f"job/{uid}",
        at(t),
    )


def _occupy(n: Narrator, uid: str, pod: str, start: float, end: float | None = None) -> None:
    n.tell(
        OccupancyStarted(
            occupancy_id=pod,
            job_uid=uid,
            pod_uid=pod,
            node="n1",
            workspace="ws-a",
            mgpu=1000,
            cpu_milli=1,
            memory_mib=1,
            started_at=at(start),
        ),
        f"job/{uid}",
        at(start),
    )
    if end is not None:
        n.tell(
            OccupancyEnded(
                occupancy_id=pod, job_uid=uid, pod_uid=pod, ended_at=at(end), reason="deleted"
            ),
            f"job/{uid}",
            at(end),
        )


def _setup(store: PostgresEventStore) -> Narrator:
    apply_quota_file(store, TREE, principal="api/test", at=EPOCH)
    n = Narrator()
    # queued (created suspended)
    _submit(n, "q1", 10)
    n.tell(JobQueued(job_uid="q1"), "job/q1", at(10))
    # running since its admission at 20
    _submit(n, "r1", 5, workspace="ws-b", flavor="gpu/A100", priority=7)
    n.tell(JobQueued(job_uid="r1"), "job/r1", at(5))
    n.tell(JobAdmitted(job_uid="r1"), "job/r1", at(20))
    _occupy(n, "r1", "p-r1", 21)
    # preempted at 50, its pod gone at 60: pending again, queued since 50
    _submit(n, "p1", 1, priority=1)
    n.tell(JobQueued(job_uid="p1"), "job/p1", at(1))
    n.tell(JobAdmitted(job_uid="p1"), "job/p1", at(2))
    _occupy(n, "p1", "p-p1", 3, 60)
    n.tell(JobPreempted(job_uid="p1"), "job/p1", at(50))
    # preempted, its pod still releasing: it still occupies
    _submit(n, "v1", 1)
    n.tell(JobQueued(job_uid="v1"), "job/v1", at(1))
    _occupy(n, "v1", "p-v1", 3)
    n.tell(JobPreempted(job_uid="v1"), "job/v1", at(70))
    # deleted while queued; and one in a quota the tree does not have
    _submit(n, "d1", 1)
    n.tell(JobQueued(job_uid="d1"), "job/d1", at(1))
    n.tell(JobDeleted(job_uid="d1"), "job/d1", at(2))
    _submit(n, "x1", 1, quota="nowhere")
    n.tell(JobQueued(job_uid="x1"), "job/x1", at(1))
    return n


def _project(store: PostgresEventStore, n: Narrator) -> None:
    store.append(n.events)
    Projector(store, all_projections()).catch_up()


def test_pending_and_admitted_from_projected_state(store: PostgresEventStore) -> None:
    n = _setup(store)
    _project(store, n)
    with store.engine.connect() as conn:
        cycle = dispatch_input(conn, at(100))
        view = read_dispatch(conn, at(100))
    pending = {j.job: j for j in cycle.pending}
    admitted = {j.job: j for j in cycle.admitted}
    assert sorted(pending) == ["p1", "q1"]
    assert sorted(admitted) == ["r1", "v1"]
    assert pending["q1"].quota == "team-a"  # by its workspace's binding
    assert pending["q1"].created_at == at(10)
    assert pending["p1"].created_at == at(50)  # requeued when preempted
    assert pending["q1"].resources == {"gpu/any": 2000, "cpu": 8000}  # memory: no quota names it
    assert admitted["r1"].resources == {"gpu/A100": 2000, "cpu": 8000}  # team-b names the model
    assert admitted["r1"].admitted_at == at(20)
    assert admitted["r1"].priority == 7
    assert cycle.queues["team-a"].policy == "StrictFIFO"
    assert [q.name for q in cycle.quotas] == ["root", "team-a", "team-b"]
    assert view.unplaced == ("x1",)
    assert view.jobs["q1"].kind == "Job" and view.jobs["q1"].namespace == "ns"
    assert cycle.now == at(100)


def test_decisions_not_yet_confirmed(store: PostgresEventStore) -> None:
    n = _setup(store)
    n.tell(
        AdmissionDecided(job_uid="q1", quota="team-a", outcome="admit"),
        "dispatch/q1",
        at(90),
        source="dispatcher",
    )
    n.tell(
        PreemptionDecided(
            preemptor="p1",
            quota="team-a",
            attempt=1,
            victims=(Victim(job_uid="r1", quota="team-b", reason="Reclaim"),),
            reason="Reclaim",
        ),
        "dispatch/p1",
        at(90),
        source="dispatcher",
    )
    _project(store, n)
    with store.engine.connect() as conn:
        view = read_dispatch(conn, at(100))
    cycle = view.cycle
    # q1 is being resumed: it holds its place as admitted, no longer pending
    assert sorted(j.job for j in cycle.pending) == ["p1"]
    assert {j.job: j.admitted_at for j in cycle.admitted}["q1"] == at(90)
    assert view.admitting == frozenset({"q1"})
    assert view.stopping == {"r1": "p1"}
    assert cycle.preempting == frozenset({"p1"})


#: the platform's integrated example, in small: inference on the parent, training and
#: notebooks on its children
WORKLOAD_TREE = """
quotas:
  - name: quota1
    min: {gpu/any: 8000}
    preemption: {within_quota: LowerPriority, reclaim: LowerPriority}
  - name: quota1.1
    parent: quota1
    min: {gpu/any: 4000}
    workspaces: [ws-b]
  - name: quota1.2
    parent: quota1
    min: {gpu/any: 4000}
    workspaces: [ws-c]
"""


def _workload(n: Narrator, uid: str, t: float, kind: str, quota: str, replicas: int) -> None:
    n.tell(
        WorkloadCreated(
            job_uid=uid,
            name=f"wl-{uid}",
            namespace="ns",
            workload=kind,  # type: ignore[arg-type]
            workspace="ws-a" if kind == "service" else "ws-c",
            quota=quota,
            priority=100 if kind == "service" else 50,
            replicas=replicas,
            replica=ReplicaSpec(count=1, flavor="gpu/any", mgpu=2000, cpu_milli=1, memory_mib=1),
        ),
        f"job/{uid}",
        at(t),
    )


def test_services_and_notebooks_are_read_replica_by_replica(store: PostgresEventStore) -> None:
    apply_quota_file(store, WORKLOAD_TREE, principal="api/test", at=EPOCH)
    n = Narrator()
    _workload(n, "svc", 10, "service", "quota1", 2)
    _occupy(n, "svc", "p-svc-0", 11)
    _occupy(n, "svc", "p-svc-1", 12)
    n.tell(WorkloadScaled(job_uid="svc", from_replicas=2, to_replicas=4), "job/svc", at(50))
    _workload(n, "nb", 60, "notebook", "quota1.2", 1)
    _workload(n, "nb2", 61, "notebook", "quota1.2", 1)
    n.tell(
        AdmissionDecided(
            job_uid="nb2#0", quota="quota1.2", outcome="refuse", reason="InsufficientQuota"
        ),
        "dispatch/nb2#0",
        at(62),
        source="dispatcher",
    )
    _project(store, n)
    with store.engine.connect() as conn:
        view = read_dispatch(conn, at(100))
    admitted = {j.job: j for j in view.cycle.admitted}
    pending = {j.job: j for j in view.cycle.pending}
    # two replicas hold pods, two more are wanted since the scale (a new episode)
    assert sorted(admitted) == ["svc#0", "svc#1"]
    assert sorted(pending) == ["nb#0", "svc#2", "svc#3"]
    assert pending["svc#2"].quota == "quota1"  # an inner quota: its own leaf in the core
    assert pending["svc#2"].resources == {"gpu/any": 2000}  # one replica's
    assert pending["svc#2"].created_at == at(50)
    assert (pending["svc#2"].workload, admitted["svc#0"].workload) == ("service", "service")
    assert pending["nb#0"].workload == "notebook"
    assert view.jobs["svc#2"].attempt == 1 and view.jobs["svc#2"].workload_uid == "svc"
    # a notebook refused at start is not queued: it waits for a new scale
    assert view.refused == {"nb2#0": "InsufficientQuota"}
    assert "nb2#0" not in pending
