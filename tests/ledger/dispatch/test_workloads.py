"""Services and notebooks in the decision core, from plain data (docs/dispatch.md,
"Services and notebooks"): the platform's integrated example of 128 GPUs — inference on
the parent quota with child-level preemption, training and notebooks on its children."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.dispatch import (
    Admitted,
    CycleInput,
    Incoming,
    Preemption,
    QueueSettings,
    QuotaNode,
    Refusal,
    Snapshot,
    Victim,
    WorkloadClass,
    decide,
    may_take,
    plan_cycle,
    replica_unit,
    unit_workload,
)
from ledger.dispatch.estimates import estimate_starts
from tests.ledger.dispatch.test_properties import check_preemption, worlds

T0 = datetime(2026, 11, 1, tzinfo=UTC)
NOW = T0 + timedelta(hours=2)
G = "gpu"

QUOTAS = (
    QuotaNode(
        "quota1",
        min={G: 128},
        preemption=Preemption(within_quota="LowerPriority", reclaim="LowerPriority"),
    ),
    QuotaNode("quota1.1", parent="quota1", min={G: 48}, preemption=Preemption(reclaim="Any")),
    QuotaNode(
        "quota1.2", parent="quota1", min={G: 80}, preemption=Preemption(reclaim="LowerPriority")
    ),
)


def svc(i: int, *, minutes: int = 0, gpus: int = 8, priority: int = 100) -> Admitted:
    return Admitted(
        replica_unit("inference", i),
        "quota1",
        priority,
        {G: gpus},
        T0 + timedelta(minutes=minutes),
        "team-a",
        workload="service",
    )


def train(name: str, minutes: int, *, gpus: int = 8, priority: int = 10) -> Admitted:
    return Admitted(
        name, "quota1.1", priority, {G: gpus}, T0 + timedelta(minutes=minutes), "team-b"
    )


def notebook(name: str, gpus: int, *, priority: int = 50) -> Admitted:
    return Admitted(name, "quota1.2", priority, {G: gpus}, T0, "team-c", workload="notebook")


def pending_replica(i: int, *, gpus: int = 8, priority: int = 100) -> Incoming:
    return Incoming(
        replica_unit("inference", i),
        "quota1",
        priority,
        {G: gpus},
        NOW,
        "team-a",
        workload="service",
    )


#: 4 replicas (32 GPUs), training 88 (its 48 and 40 borrowed of the notebooks' unused
#: guarantee), notebooks 8: the pool is full
FULL = (
    *(svc(i) for i in range(4)),
    *(train(f"t{i:02d}", minutes=i) for i in range(11)),
    notebook("nb-1", 8),
)


def test_a_replica_is_a_unit_of_its_service() -> None:
    assert replica_unit("uid-1", 3) == "uid-1#3"
    assert unit_workload("uid-1#3") == "uid-1"
    assert unit_workload("job-uid") == "job-uid"


def test_classes_never_preempt_upwards() -> None:
    assert may_take("service", "job") and may_take("service", "notebook")
    assert may_take("notebook", "job") and not may_take("notebook", "service")
    assert not may_take("job", "service") and not may_take("job", "notebook")


def test_a_scale_up_replica_reclaims_what_training_borrowed() -> None:
    decision = decide(Snapshot(QUOTAS, FULL), pending_replica(4))
    # the most recently admitted borrower of the lowest priority goes first
    assert decision.outcome == "preempt"
    assert decision.victims == (Victim("t10", "Reclaim"),)


def test_a_scale_up_reclaims_replica_by_replica() -> None:
    pending = tuple(pending_replica(i) for i in (4, 5, 6))
    result = plan_cycle(CycleInput(QUOTAS, FULL, pending, NOW))
    # the first replica preempts; the next ones would need its victim too (Kueue's
    # overlapping targets): they wait for the next cycle
    assert [(d.job, d.victims) for d in result.preemptions] == [
        ("inference#4", (Victim("t10", "Reclaim"),))
    ]
    assert not result.admissions
    # each waits in the inner quota's queue, which the result names
    assert [(p.job, p.quota, p.reason, p.position) for p in result.pending] == [
        ("inference#4", "quota1", "PreemptionPending", 1),
        ("inference#5", "quota1", "WaitingForQuota", 2),
        ("inference#6", "quota1", "WaitingForQuota", 3),
    ]
    # the victim gone: the first replica is admitted on its reservation, the next preempts
    after = tuple(wl for wl in FULL if wl.job != "t10")
    again = plan_cycle(CycleInput(QUOTAS, after, pending, NOW, reserved=frozenset({"inference#4"})))
    assert [d.job for d in again.admissions] == ["inference#4"]
    assert [(d.job, d.victims) for d in again.preemptions] == [
        ("inference#5", (Victim("t09", "Reclaim"),))
    ]


def test_a_replica_that_fits_is_admitted_on_the_parent_quota() -> None:
    running = FULL[:-2]  # one training job and the notebook fewer: 16 GPUs free
    result = plan_cycle(CycleInput(QUOTAS, running, (pending_replica(4),), NOW))
    assert [d.job for d in result.admissions] == ["inference#4"]
    assert not result.preemptions


def test_training_within_its_min_is_never_reclaimed() -> None:
    # training within its 48, notebooks within their 80: nobody borrows, the replica waits
    admitted = (
        *(svc(i) for i in range(4)),
        *(train(f"t{i}", minutes=i) for i in range(6)),
        notebook("nb-1", 48),
    )
    result = plan_cycle(CycleInput(QUOTAS, admitted, (pending_replica(4),), NOW))
    assert not result.preemptions and not result.admissions
    [status] = result.pending
    assert (status.job, status.quota, status.reason, status.position) == (
        "inference#4",
        "quota1",
        "Parked",  # BestEffortFIFO, the default: retried when capacity is freed
        1,
    )


def test_child_level_takes_only_lower_priorities() -> None:
    # training of the service's own priority is not taken under LowerPriority
    admitted = (
        *(svc(i) for i in range(4)),
        *(train(f"t{i:02d}", minutes=i, priority=100) for i in range(11)),
        notebook("nb-1", 8),
    )
    assert decide(Snapshot(QUOTAS, admitted), pending_replica(4)).outcome == "pending"


def test_training_never_preempts_a_service_whatever_its_priority() -> None:
    # the services hold 64 GPUs beyond their own pool (they borrow the children's
    # guarantees); training, within its 48 and with reclaim Any, may not take them back
    admitted = (*(svc(i) for i in range(8)), *(train(f"t{i}", minutes=i) for i in range(2)))
    admitted = (*admitted, notebook("nb-1", 48))
    for priority in (0, 100, 1000):
        incoming = Incoming("t-new", "quota1.1", priority, {G: 8}, NOW, "team-b")
        assert decide(Snapshot(QUOTAS, admitted), incoming).outcome == "pending", priority


def test_a_service_still_reclaims_what_a_lower_service_borrowed_by_kueues_rules() -> None:
    # within the parent's own quota: a higher-priority replica takes a lower one's place
    admitted = (*(svc(i, priority=5, minutes=i) for i in range(16)),)
    incoming = pending_replica(99, priority=100)
    decision = decide(Snapshot(QUOTAS, admitted), incoming)
    assert decision.outcome == "preempt"
    assert decision.victims == (Victim("inference#15", "WithinQuota"),)


def test_a_notebook_that_fits_is_admitted_at_once_ahead_of_queued_training() -> None:
    admitted = (*(svc(i) for i in range(4)), *(train(f"t{i}", minutes=i) for i in range(6)))
    # a FIFO training head that cannot fit holds its queue; the notebook is not behind it
    queued = Incoming("t-huge", "quota1.1", 10, {G: 200}, T0, "team-b")
    nb = Incoming("nb-2", "quota1.2", 50, {G: 4}, NOW, "team-c", workload="notebook")
    result = plan_cycle(
        CycleInput(
            QUOTAS,
            admitted,
            (queued, nb),
            NOW,
            queues={"quota1.1": QueueSettings(policy="StrictFIFO")},
        )
    )
    assert [d.job for d in result.admissions] == ["nb-2"]
    assert not result.refused
    assert [p.job for p in result.pending] == ["t-huge"]


def test_a_notebook_that_does_not_fit_is_refused_not_queued() -> None:
    # full, and the only borrowers are the services (never a notebook's victims)
    admitted = (
        *(svc(i) for i in range(4)),
        *(train(f"t{i}", minutes=i) for i in range(6)),
        notebook("nb-1", 48),
    )
    nb = Incoming("nb-2", "quota1.2", 50, {G: 4}, NOW, "team-c", workload="notebook")
    result = plan_cycle(CycleInput(QUOTAS, admitted, (nb,), NOW))
    assert result.refused == (Refusal("nb-2", "quota1.2", "InsufficientQuota"),)
    assert not result.pending and not result.admissions and not result.preemptions


def test_a_notebook_never_fitting_is_refused_as_such() -> None:
    nb = Incoming("nb-big", "quota1.2", 50, {G: 500}, NOW, "team-c", workload="notebook")
    result = plan_cycle(CycleInput(QUOTAS, (), (nb,), NOW))
    assert result.refused == (Refusal("nb-big", "quota1.2", "ExceedsMaxQuota"),)


def test_a_notebook_preempts_what_its_policy_allows_then_waits_only_for_its_victims() -> None:
    # notebooks within their 80 reclaim (LowerPriority) what training borrows of it
    nb = Incoming("nb-2", "quota1.2", 50, {G: 8}, NOW, "team-c", workload="notebook")
    result = plan_cycle(CycleInput(QUOTAS, FULL, (nb,), NOW))
    assert [(d.job, d.victims) for d in result.preemptions] == [
        ("nb-2", (Victim("t10", "Reclaim"),))
    ]
    assert not result.refused
    [status] = result.pending
    assert (status.job, status.reason, status.position) == ("nb-2", "PreemptionPending", 0)
    # once the victim is gone, its reservation admits it
    after = tuple(wl for wl in FULL if wl.job != "t10")
    again = plan_cycle(CycleInput(QUOTAS, after, (nb,), NOW, reserved=frozenset({"nb-2"})))
    assert [d.job for d in again.admissions] == ["nb-2"]


def test_a_waiting_replica_has_an_estimated_start() -> None:
    # nobody borrows: the replica waits for a training job to end
    admitted = (
        *(svc(i) for i in range(4)),
        *(train(f"t{i}", minutes=i) for i in range(6)),
        notebook("nb-1", 48),
    )
    cycle = CycleInput(QUOTAS, admitted, (pending_replica(4),), NOW)
    ends = {wl.job: NOW + timedelta(hours=1 + i) for i, wl in enumerate(admitted)}
    ends["t0"] = NOW + timedelta(minutes=30)
    estimate = estimate_starts(cycle, ends, {"inference#4": timedelta(days=30)})
    start = estimate["inference#4"]
    assert start.start == NOW + timedelta(minutes=30)
    assert start.basis == "simulated"


# spillover -----------------------------------------------------------------------------


def spilling(i: int, *, gpus: int = 8, priority: int = 100) -> Incoming:
    return replace(pending_replica(i, gpus=gpus, priority=priority), spillover=True)


#: nobody borrows (training within its 48, notebooks within their 80): a replica finds no
#: victim its quota's policies allow
NO_VICTIM = (
    *(svc(i) for i in range(4)),
    *(train(f"t{i}", minutes=i) for i in range(6)),
    notebook("nb-1", 48),
)


def test_a_spillover_replica_that_finds_no_victim_is_admitted_on_public_resources() -> None:
    result = plan_cycle(CycleInput(QUOTAS, NO_VICTIM, (spilling(4), spilling(5)), NOW))
    assert [(d.job, d.outcome, d.spillover) for d in result.admissions] == [
        ("inference#4", "admit", True),
        ("inference#5", "admit", True),
    ]
    assert not result.preemptions and not result.pending and not result.parked
    assert result.admissions[0].as_document()["spillover"] is True


def test_a_spilled_replica_takes_nothing_from_the_quota() -> None:
    # 8 GPUs free (the notebook gone), both borrow: the replica (priority 5: no training
    # borrower is lower, so it preempts nothing) is decided first and spills; counted, its
    # 16 GPUs would leave nothing to the training job decided after it
    admitted = FULL[:-1]
    spill = spilling(4, gpus=16, priority=5)
    job = Incoming("t-new", "quota1.1", 1, {G: 8}, NOW, "team-b")
    result = plan_cycle(CycleInput(QUOTAS, admitted, (spill, job), NOW))
    assert [(d.job, d.spillover) for d in result.admissions] == [
        ("inference#4", True),
        ("t-new", False),
    ]


def test_a_spillover_replica_that_fits_or_may_preempt_stays_within_its_quota() -> None:
    # it fits: admitted within the quota, as any replica
    running = FULL[:-2]
    result = plan_cycle(CycleInput(QUOTAS, running, (spilling(4),), NOW))
    assert [(d.job, d.spillover) for d in result.admissions] == [("inference#4", False)]
    # a borrower its policy allows it to reclaim: it preempts rather than spill; the next
    # replica, which needs the same victim (overlapping targets), found a victim too: it
    # waits to preempt next cycle, as any replica
    result = plan_cycle(CycleInput(QUOTAS, FULL, (spilling(4), spilling(5)), NOW))
    assert [(d.job, d.victims) for d in result.preemptions] == [
        ("inference#4", (Victim("t10", "Reclaim"),))
    ]
    assert not result.admissions
    assert [(p.job, p.reason) for p in result.pending] == [
        ("inference#4", "PreemptionPending"),
        ("inference#5", "WaitingForQuota"),
    ]


def test_a_spillover_replica_never_fitting_or_held_spills_but_budget_stops_it() -> None:
    never = spilling(4, gpus=1000)
    # a StrictFIFO head of the inner quota that cannot fit holds what is behind it
    head = replace(pending_replica(7, gpus=1000), created_at=T0)
    queues = {"quota1": QueueSettings(policy="StrictFIFO")}
    result = plan_cycle(CycleInput(QUOTAS, NO_VICTIM, (never, head, spilling(5)), NOW, queues))
    assert sorted((d.job, d.spillover) for d in result.admissions) == [
        ("inference#4", True),
        ("inference#5", True),
    ]
    assert [(p.job, p.reason) for p in result.pending] == [("inference#7", "ExceedsMaxQuota")]
    # nothing of a workspace whose stop budget is exhausted runs, spilled or not
    blocked = plan_cycle(
        CycleInput(QUOTAS, NO_VICTIM, (spilling(4),), NOW, blocked_workspaces=frozenset({"team-a"}))
    )
    assert not blocked.admissions
    assert [(p.job, p.reason) for p in blocked.pending] == [("inference#4", "BudgetExhausted")]


# properties ----------------------------------------------------------------------------

CLASSES: tuple[WorkloadClass, ...] = ("job", "notebook", "service")


@settings(max_examples=200, deadline=None)
@given(worlds(), st.data())
def test_no_victim_is_of_a_higher_class_than_its_preemptor(
    world: tuple[Snapshot, Incoming], data: st.DataObject
) -> None:
    """Kueue's worlds of the properties (random three-level trees, policies, priorities)
    with random classes: whatever the policies, a preemptor never takes a higher class,
    and the decisions stay sound (each victim needed, policies kept)."""
    snap, inc = world
    admitted = tuple(
        replace(wl, workload=data.draw(st.sampled_from(CLASSES))) for wl in snap.admitted
    )
    inc = replace(inc, workload=data.draw(st.sampled_from(CLASSES)))
    snap = replace(snap, admitted=admitted)
    d = decide(snap, inc)
    by_name = {wl.job: wl for wl in admitted}
    assert all(may_take(inc.workload, by_name[v.job].workload) for v in d.victims)
    if d.outcome == "preempt":
        check_preemption(snap, inc, d)


def test_a_service_loses_its_highest_replica_first() -> None:
    # a service's running replicas are its lowest indices and the actuator deletes its
    # newest pod: the victim named must be the replica that goes (the highest index, not
    # the first by name: "#10" < "#2"), or the loop would still see the named one running
    # and take a second; its replicas share one admission instant
    admitted = tuple(
        Admitted(replica_unit("other", i), "quota1", 5, {G: 8}, T0, "team-x", workload="service")
        for i in range(16)
    )
    decision = decide(Snapshot(QUOTAS, admitted), pending_replica(99, priority=100))
    assert decision.outcome == "preempt"
    assert decision.victims == (Victim("other#15", "WithinQuota"),)
