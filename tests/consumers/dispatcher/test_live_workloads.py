"""Services and notebooks through the live loop on kubesim (docs/dispatch.md, "Services and
notebooks"): the platform's integrated example in small. Replica pods are created gated
(``dlc.ledger/admission``, as an admission webhook would); kubesim runs no Deployment
controller, so the test makes a scale-up's pod itself, as the controller would."""

from __future__ import annotations

from datetime import timedelta

from kubernetes import client

from consumers.watchers.labels import ANNOTATION_REFUSED, SCHEDULING_GATE
from consumers.watchers.listwatch import DEPLOYMENTS, JOBS, PODS, PYTORCHJOBS
from dlc_ledger.api.listing import plain
from dlc_ledger.api.models_dispatch import Why
from dlc_ledger.services.billing import publish_price_book
from dlc_ledger.services.dispatch import why_job
from dlc_ledger.services.quotas import draw_on_groups
from dlc_ledger.services.subscriptions import purchase
from kubesim import DEPLOYMENTS as SIM_DEPLOYMENTS
from kubesim import PODS as SIM_PODS
from kubesim import KubeSim
from kubesim.services import deployment_object, replica_pod
from kubesim.store import Object
from ledger.store.postgres import PostgresEventStore
from projections.dispatch import DecisionWindow, preemptions_report, queue_listing
from tests.consumers.dispatcher.test_budgets_seam import Gate
from tests.support.billing import demo_book
from tests.support.builders import EPOCH
from tests.support.live import Live

#: 4 GPUs: inference on the parent (child-level preemption), training and notebooks below
TREE = """
quotas:
  - name: quota1
    min: {gpu/any: 4000}
    preemption: {within_quota: LowerPriority, reclaim: LowerPriority}
  - name: quota1.1
    parent: quota1
    min: {gpu/any: 2000}
    workspaces: [ws-b]
  - name: quota1.2
    parent: quota1
    min: {gpu/any: 2000}
    workspaces: [ws-c]
"""


def _workload(live: Live, name: str, labels: dict[str, str]) -> Object:
    return live.sim.cluster.create(
        SIM_DEPLOYMENTS, deployment_object(name, "ns1", replicas=1, labels=labels, gpus=1)
    )


def _gated_pod(live: Live, workload: Object, index: int) -> Object:
    pod = replica_pod(workload, index, live.sim.clock.timestamp())
    pod["spec"]["schedulingGates"] = [{"name": SCHEDULING_GATE}]
    return live.sim.cluster.create(SIM_PODS, pod)


def _pod(sim: KubeSim, name: str) -> Object:
    return sim.store.get(SIM_PODS, "ns1", name)


def test_inference_reclaims_training_replica_by_replica_and_a_notebook_is_refused(
    sim: KubeSim, store: PostgresEventStore
) -> None:
    live = Live(sim, store, TREE, resources=(JOBS, PYTORCHJOBS, PODS, DEPLOYMENTS))
    try:
        # training: 3 GPUs, one borrowed of the notebooks' idle guarantee
        training = [live.submit(f"t{i}", "ws-b", 1) for i in range(3)]
        assert sorted(live.dispatcher.cycle().admitted) == sorted(training)
        sim.advance(10)
        live.dispatcher.cycle()

        # inference on the parent: one replica, its pod gated; it fits the last GPU
        team_a = {
            "dlc.ledger/workspace": "ws-a",
            "dlc.ledger/quota": "quota1",
            "dlc.ledger/priority": "100",
        }
        svc = _workload(live, "infer", team_a)
        uid = svc["metadata"]["uid"]
        first = _gated_pod(live, svc, 0)
        sim.advance(10)
        admitted = live.dispatcher.cycle()
        assert admitted.admitted == (f"{uid}#0",) and admitted.released == (uid,)
        assert not _pod(sim, first["metadata"]["name"])["spec"].get("schedulingGates")

        # scale to 2: the new replica's pod is gated; it reclaims the newest borrower
        sim.advance(10)
        client.AppsV1Api(live.api).patch_namespaced_deployment(
            "infer", "ns1", {"spec": {"replicas": 2}}
        )
        second = _gated_pod(live, svc, 1)
        sim.advance(1)
        preempting = live.dispatcher.cycle()
        ((preemptor, (victim,)),) = preempting.preemptions
        # the three were admitted together: the borrower taken is one of them
        assert preemptor == f"{uid}#1" and victim in training
        assert preempting.suspended == (victim,)
        assert _pod(sim, second["metadata"]["name"])["spec"]["schedulingGates"]
        (decided,) = [d for d in live.decisions() if d.type == "PreemptionDecided"]
        assert decided.data["quota"] == "quota1" and decided.data["reason"] == "Reclaim"
        assert decided.data["victims"][0]["quota"] == "quota1.1"

        # why: the service's waiting replica, its reason and place in quota1's queue
        why = why_job(store, uid)
        assert (why["answer"], why["replica"]) == ("pending", f"{uid}#1")
        assert why["replicas"]["running"] == [f"{uid}#0"]
        assert why["pending"]["reason"] == "PreemptionPending"
        assert why["pending"]["position"] == 1
        assert why["quota"] == "quota1" and "estimate" in why["pending"]
        Why.model_validate(plain(why))  # what /v1/jobs/{uid}/why serves
        # and in the parent quota's queue (queue show quota1), in its tree's order
        with store.engine.connect() as conn:
            queue = queue_listing(conn, "quota1", sim.clock.now())
        assert [(r["job_uid"], r["quota"]) for r in queue.rows] == [(f"{uid}#1", "quota1")]

        sim.advance(31)  # the victim's pod is gone (its grace): the replica is admitted
        later = live.dispatcher.cycle()
        assert later.admitted == (f"{uid}#1",)
        assert not _pod(sim, second["metadata"]["name"])["spec"].get("schedulingGates")
        sim.advance(1)
        settled = live.dispatcher.cycle()
        # the preempted training job waits: training never takes a replica back
        assert [s.job for s in settled.result.pending] == [victim]
        assert settled.result.preemptions == ()

        # the preemption report: the service's replica took a training borrower
        live.project()
        with store.engine.connect() as conn:
            (row,) = preemptions_report(conn, DecisionWindow(EPOCH, sim.clock.now(), None))
        assert (row["preemptor"], row["preemptor_quota"], row["preemptor_priority"]) == (
            "infer",
            "quota1",
            100,
        )
        assert (row["victim_uid"], row["victim_quota"], row["reason"]) == (
            victim,
            "quota1.1",
            "Reclaim",
        )
        assert row["gpu_hours_lost"] > 0  # the training job ran 1 GPU for ~40 s

        # a notebook now: the pool is full, its quota preempts nothing: refused, not queued
        notebook = _workload(
            live,
            "nb",
            {"dlc.ledger/workspace": "ws-c", "dlc.ledger/workload": "notebook"},
        )
        _gated_pod(live, notebook, 0)
        sim.advance(1)
        refused = live.dispatcher.cycle()
        nb = f"{notebook['metadata']['uid']}#0"
        assert refused.refused == (nb,)
        assert nb not in {s.job for s in refused.result.pending}
        scaled = sim.store.get(SIM_DEPLOYMENTS, "ns1", "nb")
        assert scaled["spec"]["replicas"] == 0
        assert scaled["metadata"]["annotations"][ANNOTATION_REFUSED] == "InsufficientQuota"
        (decision,) = [
            d for d in live.decisions() if d.type == "AdmissionDecided" and d.data["job_uid"] == nb
        ]
        assert decision.data["outcome"] == "refuse"
        assert decision.data["reason"] == "InsufficientQuota"
        sim.advance(1)
        assert live.dispatcher.cycle().refused == ()  # scaled to none: nothing asks
        refusal = why_job(store, notebook["metadata"]["uid"])
        assert refusal["answer"] == "refused"
        assert refusal["refusal"]["reason"] == "InsufficientQuota"
        assert "never queued" in refusal["summary"]
        Why.model_validate(plain(refusal))
    finally:
        live.close()


def test_a_spillover_replica_beyond_its_quota_runs_on_public_resources(
    sim: KubeSim, store: PostgresEventStore
) -> None:
    live = Live(sim, store, TREE, resources=(JOBS, PYTORCHJOBS, PODS, DEPLOYMENTS))
    try:
        gate = Gate()
        live.dispatcher = live.new_dispatcher(budgets=gate)
        # training fills the 4 GPUs at the service's priority: child-level takes nothing
        training = [live.submit(f"t{i}", "ws-b", 1) for i in range(4)]
        assert sorted(live.dispatcher.cycle().admitted) == sorted(training)
        sim.advance(10)
        live.dispatcher.cycle()

        svc = _workload(
            live,
            "ranker",
            {
                "dlc.ledger/workspace": "ws-a",
                "dlc.ledger/quota": "quota1",
                "dlc.ledger/spillover": "public",
                "dlc.ledger/billing-mode": "quota",  # prepaid within its quota
            },
        )
        uid, unit = svc["metadata"]["uid"], f"{svc['metadata']['uid']}#0"
        pod = _gated_pod(live, svc, 0)
        sim.advance(10)
        spilled = live.dispatcher.cycle()
        # admitted at once on public resources, not waiting: its gate lifted
        assert spilled.admitted == (unit,) and spilled.released == (uid,)
        assert spilled.result.admissions[0].spillover and not spilled.result.preemptions
        assert not _pod(sim, pod["metadata"]["name"])["spec"].get("schedulingGates")
        (decision,) = [d for d in live.decisions() if d.data.get("job_uid") == unit]
        assert (decision.data["outcome"], decision.data["reason"]) == ("admit", "Spillover")
        assert decision.data["borrowing"] is False

        # running: outside the quota, it counts against none and nobody may take it
        sim.advance(1)
        later = live.dispatcher.cycle()
        assert later.admitted == () and later.preemptions == () and later.pending == 0
        view, _ = live.dispatcher.read(sim.clock.now())
        assert view.spilled == frozenset({unit}) and view.jobs[unit].occupying
        assert unit not in {wl.job for wl in view.cycle.admitted}

        why = why_job(store, uid)
        assert why["answer"] == "running" and why["replicas"]["spilled"] == [unit]
        assert why["admission"]["spillover"] is True
        assert "on public resources" in why["summary"]
        Why.model_validate(plain(why))

        # its workspace's stop budget exhausted: the prepaid service is not scaled down,
        # but its replica on public resources (pay-as-you-go) is stopped, its pod deleted
        gate.exhausted = frozenset({"ws-a"})
        sim.advance(1)
        stopped = live.dispatcher.cycle()
        assert stopped.workloads_stopped == () and stopped.spill_stopped == (unit,)
        assert sim.store.get(SIM_DEPLOYMENTS, "ns1", "ranker")["spec"]["replicas"] == 1
        assert sim.store.find(SIM_PODS, "ns1", pod["metadata"]["name"]) is None
        (stop,) = [d for d in live.decisions() if d.data.get("outcome") == "stop"]
        assert (stop.data["job_uid"], stop.data["reason"]) == (unit, "BudgetExhausted")
        sim.advance(1)
        again = live.dispatcher.cycle()  # its pod gone: nothing more to stop
        assert again.spill_stopped == () and again.admitted == ()
    finally:
        live.close()


def _scaled_to_none(sim: KubeSim, name: str) -> str | None:
    """The reason a workload was scaled to none by the dispatcher, if it was."""
    obj = sim.store.get(SIM_DEPLOYMENTS, "ns1", name)
    if obj["spec"]["replicas"] != 0:
        return None
    return str(obj["metadata"]["annotations"][ANNOTATION_REFUSED])


def _running_workload(live: Live, name: str, labels: dict[str, str]) -> str:
    """A workload of one replica, admitted (its pod's gate lifted) and bound."""
    obj = _workload(live, name, labels)
    _gated_pod(live, obj, 0)
    live.sim.advance(1)
    uid = str(obj["metadata"]["uid"])
    assert live.dispatcher.cycle().admitted == (f"{uid}#0",)
    live.sim.advance(1)
    live.dispatcher.cycle()
    return uid


def test_an_exhausted_budget_stops_a_pay_as_you_go_service_not_a_prepaid_notebook(
    sim: KubeSim, store: PostgresEventStore
) -> None:
    live = Live(sim, store, resources=(JOBS, PYTORCHJOBS, PODS, DEPLOYMENTS))
    try:
        gate = Gate()
        live.dispatcher = live.new_dispatcher(budgets=gate)
        service = _running_workload(live, "api", {"dlc.ledger/workspace": "ws-b"})
        notebook = _running_workload(
            live,
            "nb",
            {
                "dlc.ledger/workspace": "ws-b",
                "dlc.ledger/workload": "notebook",
                "dlc.ledger/billing-mode": "quota",
            },
        )

        gate.exhausted = frozenset({"ws-b"})
        sim.advance(1)
        stopping = live.dispatcher.cycle()
        assert stopping.workloads_stopped == ((service, "BudgetExhausted"),)
        assert "workloads stopped 1" in stopping.summary()
        assert _scaled_to_none(sim, "api") == "BudgetExhausted"
        assert _scaled_to_none(sim, "nb") is None  # prepaid: a budget never stops it
        (stop,) = [d for d in live.decisions() if d.data.get("outcome") == "stop"]
        assert (stop.data["job_uid"], stop.data["reason"]) == (service, "BudgetExhausted")
        assert stop.data["state"]["replicas"] == {"held": 1, "per_replica": 1}
        # stored once per episode: the next cycles store no second one
        sim.advance(1)
        live.dispatcher.cycle()
        assert len([d for d in live.decisions() if d.data.get("outcome") == "stop"]) == 1
        why = why_job(store, service)
        assert why["stopped"]["reason"] == "BudgetExhausted"
        Why.model_validate(plain(why))
        assert notebook not in {uid for uid, _ in stopping.workloads_stopped}
    finally:
        live.close()


def test_a_released_subscription_stops_a_running_service_after_the_grace(
    sim: KubeSim, store: PostgresEventStore
) -> None:
    live = Live(sim, store, resources=(JOBS, PYTORCHJOBS, PODS, DEPLOYMENTS))
    try:
        now = sim.clock.now()
        publish_price_book(store, demo_book(), at=now)
        order = purchase(
            store, group="gpu-g2", spec="ml.g2.8xlarge", nodes=1, term="month",
            workspace="ws-a", principal="test", at=now,
        )  # fmt: skip
        draw_on_groups(store, {"root": ["gpu-g2"]}, principal="test", at=now)
        service = _running_workload(
            live, "api", {"dlc.ledger/workspace": "ws-a", "dlc.ledger/billing-mode": "quota"}
        )
        end = order.subscription.ends_at
        sim.advance((end - sim.clock.now()).total_seconds() + 3600)  # in its grace
        assert live.dispatcher.cycle().workloads_stopped == ()
        sim.advance(timedelta(hours=24).total_seconds())  # past the grace: released
        released = live.dispatcher.cycle()
        assert released.workloads_stopped == ((service, "SubscriptionExpired"),)
        assert _scaled_to_none(sim, "api") == "SubscriptionExpired"
    finally:
        live.close()
