"""Inference services under the live dispatcher in a closed-loop replay, through the real
pipeline (kubesim, watcher, Kafka, ingest, projections) and the real dispatcher.

A slice of DLRM (app_124's instances from its first one with a GPU on, 7 of them, two
CPU-only: one service, its replicas scaling up and down) and four openb burstable training
rows (public: an idle-mode job is any workload's first victim, whatever the tree), on one
quota tree: training owns 2 GPUs and may borrow up to 6, inference owns 4 and reclaims from
any borrower. Training arrives first and borrows the service's idle guarantee; the
service's third and fourth scale-ups (each one a gated replica pod the dispatcher releases)
then make the dispatcher preempt borrowing training replica by replica; its later
scale-ups, beyond its guarantee, wait gated; the preempted training runs again, in full.
(The dispatcher counts every replica at the Deployment template's resources, its first
row's: 1 GPU, the CPU-only replicas too.) Then two services, one reclaiming from the other:
a preempted replica comes back gated and runs its full length again once released.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

from dlc_ledger.wiring.replay import ReplaySummary
from kubesim.traces import Trace, TraceInstance, live_rows, load_dlrm, load_openb
from ledger.store.postgres import PostgresEventStore
from tests.support.live_replays import replay_closed_loop, stored_events

TREE = """
quotas:
  - name: cluster
    min: {gpu/any: 6000}
  - name: training
    parent: cluster
    min: {gpu/any: 2000}
    max: {gpu/any: 6000}
    preemption: {within_quota: Never, reclaim: Never}
    workspaces: [ws-burstable]
  - name: inference
    parent: cluster
    min: {gpu/any: 4000}
    preemption: {within_quota: Never, reclaim: Any}
    workspaces: [app_124]
"""

#: openb ws-burstable rows (public, priority 100) of one GPU that ran 61-69 minutes
TRAINING = ("openb-pod-0270", "openb-pod-0995", "openb-pod-1523", "openb-pod-1876")


def _moved(inst: TraceInstance, created: int) -> TraceInstance:
    """``inst`` created at ``created``, its times shifted alike (its run length kept)."""
    shift = created - inst.created
    return replace(
        inst,
        created=created,
        scheduled=None if inst.scheduled is None else inst.scheduled + shift,
        deleted=None if inst.deleted is None else inst.deleted + shift,
    )


def _trace() -> Trace:
    openb = load_openb()
    by_name = {i.job_name: i for i in openb.instances}
    training = [_moved(by_name[name], 600 + 10 * n) for n, name in enumerate(TRAINING)]
    dlrm = [i for i in load_dlrm().instances if i.service == "app-124"]
    first = min(i.created for i in dlrm if i.gpu_milli)
    # from its first GPU replica on, at 1800: two replicas then, two more at ~3950
    service = [_moved(i, i.created - first + 1800) for i in dlrm if i.created >= first]
    assert len(service) == 7 and not any(i.pre_existing for i in service)
    rows = (*training, *service)
    end = max(i.deleted or 0 for i in rows)
    return Trace("openb+dlrm", openb.epoch, openb.nodes, rows, end)


def _replay(
    store: PostgresEventStore,
    bootstrap: str,
    tmp_path: Path,
    trace: Trace,
    tree: str,
    live_from: datetime | None = None,
) -> ReplaySummary:
    return replay_closed_loop(store, bootstrap, tmp_path, trace, tree, live_from, within=60)


def test_service_scale_ups_preempt_borrowing_training_replica_by_replica(
    store: PostgresEventStore, bootstrap: str, tmp_path: Path
) -> None:
    trace = _trace()
    summary = _replay(store, bootstrap, tmp_path, trace, TREE)
    assert summary.ok and summary.dead_letters == 0
    figures = summary.closed_loop
    assert figures is not None and figures.jobs == len(trace.instances)
    # every row ran to its end: the training runs, the replicas scaled up and down
    assert figures.succeeded == len(trace.instances) and figures.never_admitted == 0

    names = {
        e.data["job_uid"]: e.data["name"]
        for e in stored_events(store, "JobSubmitted", "WorkloadCreated")
    }
    service = {u for u, n in names.items() if n == "app-124"}
    assert len(service) == 1, names  # one workload: the Deployment, its replicas pods
    preemptions = stored_events(store, "PreemptionDecided")
    assert preemptions, "the service's scale-ups reclaimed from borrowing training"
    victims: set[str] = set()
    for e in preemptions:
        # a replica decides as ``<workload uid>#<slot>``
        assert e.data["preemptor"].split("#")[0] in service, e.data
        assert e.data["quota"] == "inference"
        print("preemption", e.occurred_at, e.data["preemptor"], e.data["victims"])
        # one borrowing training job for one replica
        assert [v["quota"] for v in e.data["victims"]] == ["training"]
        assert e.data["state"]["training.used"]["gpu/any"] > 2000  # beyond its min
        victims |= {names[v["job_uid"]] for v in e.data["victims"]}
    assert victims <= set(TRAINING) and len(victims) == 2
    # replica by replica, within the service's guarantee: its third and fourth GPU (at
    # ~3930 s); its later scale-ups (from 4557 s, beyond its 4 GPUs) wait gated
    seconds = sorted(e.occurred_at.timestamp() - trace.epoch.timestamp() for e in preemptions)
    assert len(seconds) == 2 and seconds[0] >= 3900 and seconds[-1] < 4557
    # a victim ran twice: until its preemption, then in full once the service scaled down
    starts: dict[str, list[datetime]] = {}
    for e in stored_events(store, "OccupancyStarted"):
        starts.setdefault(names[e.data["job_uid"]], []).append(e.occurred_at)
    for name in victims:
        assert len(starts[name]) >= 2, (name, starts[name])
    # the service's replicas: scaled up and down by the trace, released by the dispatcher
    scaled = stored_events(store, "WorkloadScaled")
    assert len(scaled) >= 10, len(scaled)
    released = [
        e
        for e in stored_events(store, "AdmissionDecided")
        if e.data["job_uid"].split("#")[0] in service and e.data["outcome"] == "admit"
    ]
    assert len(released) >= 5


def test_a_live_copy_of_a_service_scales_under_the_dispatcher_after_its_history(
    store: PostgresEventStore, bootstrap: str, tmp_path: Path
) -> None:
    # the same rows as history, played open loop as the trace ran them, then a live copy
    # of them (keep_services: app-124-live is a service of its own) under the dispatcher
    history = _trace()
    at = (history.end // 3600 + 1) * 3600
    trace = live_rows(history, (0, at), at, keep_services=True)
    live_from = trace.epoch + timedelta(seconds=at)
    summary = _replay(store, bootstrap, tmp_path, trace, TREE, live_from)
    # the history exact against the trace, the live copies all run to their end
    assert summary.ok and summary.mismatches == [] and summary.dead_letters == 0
    figures = summary.closed_loop
    assert figures is not None and figures.jobs == len(history.instances)
    assert figures.succeeded == figures.jobs
    names = {
        e.data["job_uid"]: e.data["name"]
        for e in stored_events(store, "JobSubmitted", "WorkloadCreated")
    }
    assert {"app-124", "app-124-live"} <= set(names.values())
    preemptions = stored_events(store, "PreemptionDecided")
    assert preemptions and min(e.occurred_at for e in preemptions) >= trace.epoch + timedelta(
        seconds=at
    )
    for e in preemptions:  # the live service reclaims from the live training copies
        assert names[e.data["preemptor"].split("#")[0]] == "app-124-live"
        assert {names[v["job_uid"]] for v in e.data["victims"]} <= {
            f"{name}-live" for name in TRAINING
        }


#: two services: app_124 borrows app_b's idle guarantee, app_b reclaims it
TWO_SERVICES = """
quotas:
  - name: cluster
    min: {gpu/any: 6000}
  - name: inference-a
    parent: cluster
    min: {gpu/any: 2000}
    max: {gpu/any: 6000}
    preemption: {within_quota: Never, reclaim: Never}
    workspaces: [app_124]
  - name: inference-b
    parent: cluster
    min: {gpu/any: 4000}
    preemption: {within_quota: Never, reclaim: Any}
    workspaces: [app_b]
"""


def test_a_preempted_replica_comes_back_gated_and_runs_again_once_released(
    store: PostgresEventStore, bootstrap: str, tmp_path: Path
) -> None:
    # app_124 alone holds the 6 GPUs from 4558 (4 borrowed); at 4600 a second service,
    # app_b (two of app_124's GPU rows as another app), scales up and reclaims from it
    rows = [i for i in _trace().instances if i.service is not None]
    second = [
        replace(
            _moved(i, 4600 + n),
            job_name=f"{i.job_name}-b",
            namespace="app-b",
            workspace="app_b",
            user="app_b",
            service="app-b",
        )
        for n, i in enumerate(rows[:2])
    ]
    base = _trace()
    trace = replace(base, instances=(*rows, *second), end=max(i.deleted or 0 for i in second))
    summary = _replay(store, bootstrap, tmp_path, trace, TWO_SERVICES)
    assert summary.ok and summary.dead_letters == 0
    figures = summary.closed_loop
    assert figures is not None and figures.succeeded == figures.jobs == len(trace.instances)
    names = {e.data["job_uid"]: e.data["name"] for e in stored_events(store, "WorkloadCreated")}
    preemptions = stored_events(store, "PreemptionDecided")
    assert preemptions
    for e in preemptions:  # app_b's replicas reclaim from app_124's, replica by replica
        assert names[e.data["preemptor"].split("#")[0]] == "app-b"
        assert all(names[v["job_uid"].split("#")[0]] == "app-124" for v in e.data["victims"])
    # a preempted replica's pod, made again gated (same name), ran again once released,
    # its row's full run length from then
    length = {
        i.replica: (i.deleted or 0) - (i.scheduled or 0) for i in rows if i.scheduled is not None
    }
    runs: dict[str, list[tuple[str, str | None, str | None]]] = {}
    ended = {e.data["occupancy_id"]: e.data for e in stored_events(store, "OccupancyEnded")}
    for e in stored_events(store, "OccupancyStarted"):
        end = ended.get(e.data["occupancy_id"])
        runs.setdefault(e.data["pod_name"], []).append(
            (
                e.data["started_at"],
                None if end is None else end["ended_at"],
                None if end is None else end.get("reason"),
            )
        )
    preempted = {pod for pod, occ in runs.items() if any(r == "preempted" for *_, r in occ)}
    assert preempted and all(p.startswith("app-124-") for p in preempted)
    # no replica taken twice, none more than the reclaim needed: a decision names the
    # replica whose pod goes (the highest), so the next cycle sees it gone
    named = [v["job_uid"] for e in preemptions for v in e.data["victims"]]
    taken = sum(r == "preempted" for occ in runs.values() for *_, r in occ)
    assert len(named) == len(set(named)) == taken == len(preemptions), (named, taken)
    for pod in preempted:
        *before, (started, end, reason) = runs[pod]
        assert before and reason == "completed" and end is not None, runs[pod]
        seconds = (datetime.fromisoformat(end) - datetime.fromisoformat(started)).total_seconds()
        assert seconds == length[int(pod.rsplit("-", 1)[1])], (pod, runs[pod])
