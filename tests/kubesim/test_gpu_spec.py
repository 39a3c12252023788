"""A trace row's ``gpu_spec`` (openb: the GPU models a pod was constrained to) binds the
pod to a node of those models and says so in the pod, as a real cluster would."""

from __future__ import annotations

from pathlib import Path

from consumers.watchers.facts import pod_facts
from kubesim import PODS, KubeSim
from kubesim.driver import NodePlacer, TraceDriver
from kubesim.traces import Trace, TraceInstance, TraceNode, load_openb

NODES = (
    TraceNode("a-t4", 2, 32000, 65536, "T4"),
    TraceNode("b-t4", 2, 32000, 65536, "T4"),
    TraceNode("z-v100", 2, 32000, 65536, "V100M16"),
    TraceNode("z-v100m32", 2, 32000, 65536, "V100M32"),
)


def _instance(name: str, gpu_milli: int, models: tuple[str, ...]) -> TraceInstance:
    return TraceInstance(
        job_name=name, source_name=name, namespace="ws-ls", workspace="ws-ls",
        billing_mode="public", user="openb", priority=200, cpu_milli=1000, memory_mib=1024,
        gpu_milli=gpu_milli, gpus=max(1, gpu_milli // 1000), created=0, scheduled=10,
        deleted=None, gpu_models=models,
    )  # fmt: skip


def test_openb_gpu_spec_is_read_as_the_models_a_pod_may_run_on(tmp_path: Path) -> None:
    pods, nodes = tmp_path / "pods.csv", tmp_path / "nodes.csv"
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
        "creation_time,deletion_time,scheduled_time\n"
        "p0,1000,1024,1,1000,,LS,Running,0,10,0\n"
        "p1,1000,1024,1,1000,V100M16|V100M32,LS,Running,0,10,0\n"
        "p2,1000,1024,1,500,T4,BE,Running,0,10,0\n"
    )
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,65536,2,T4\n")
    trace = load_openb(pods, nodes)
    assert [i.gpu_models for i in trace.instances] == [(), ("V100M16", "V100M32"), ("T4",)]


def test_the_placer_keeps_a_constrained_pod_on_its_models_even_overcommitted() -> None:
    placer = NodePlacer(NODES)
    assert placer.place(1000, 1000, 1024) == "a-t4"  # unconstrained: least loaded, by name
    assert placer.place(1000, 1000, 1024, ("V100M16",)) == "z-v100"
    placer.add("z-v100", 2000, 0, 0)  # full
    assert placer.place(1000, 1000, 1024, ("V100M16",)) == "z-v100"  # overcommitted
    assert placer.overcommits == 1
    assert placer.place(1000, 1000, 1024, ("V100M16", "V100M32")) == "z-v100m32"
    assert placer.place(1000, 1000, 1024, ("H100",)) == "a-t4"  # no such node at all


def test_a_constrained_pod_is_bound_to_its_model_and_names_it(sim: KubeSim) -> None:
    instances = (
        _instance("one", 1000, ("V100M16",)),
        _instance("two", 1000, ("V100M16", "V100M32")),
        _instance("free", 1000, ()),
    )
    trace = Trace("openb", load_openb().epoch, NODES, instances, 20)
    TraceDriver(sim, trace, speed="max").run()
    pods = {p["metadata"]["name"]: p for p in sim.store.items(PODS)}
    one, two, free = (pods[f"{n}-0"] for n in ("one", "two", "free"))
    assert one["spec"]["nodeName"] == "z-v100"
    assert two["spec"]["nodeName"] in ("z-v100", "z-v100m32")
    assert free["spec"]["nodeName"] in ("a-t4", "b-t4")
    # one model: a nodeSelector, so the pod names its flavor; several: a node affinity,
    # so the occupancy takes its node's model
    assert pod_facts(one).named_flavor == "gpu/V100M16"
    terms = two["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["V100M16", "V100M32"]
    assert pod_facts(two).named_flavor is None and pod_facts(free).named_flavor is None
