"""kubesim: a stand-in Kubernetes API server for tests, the demo and trace replays.

It serves Pods, Nodes, batch Jobs, Kubeflow jobs and the workloads of services and notebooks
(Deployments, StatefulSets, LeaderWorkerSets) over the real list / watch / patch / delete
protocol on loopback, on a virtual clock, and can be driven by public GPU traces.
"""

from kubesim.clock import DEFAULT_EPOCH, VirtualClock, format_time
from kubesim.resources import (
    BATCH_JOBS,
    DEPLOYMENTS,
    LEADERWORKERSETS,
    MPIJOBS,
    NODES,
    PODS,
    PYTORCHJOBS,
    STATEFULSETS,
    TFJOBS,
    ResourceType,
)
from kubesim.server import KubeSim

__all__ = [
    "BATCH_JOBS",
    "DEFAULT_EPOCH",
    "DEPLOYMENTS",
    "LEADERWORKERSETS",
    "MPIJOBS",
    "NODES",
    "PODS",
    "PYTORCHJOBS",
    "STATEFULSETS",
    "TFJOBS",
    "KubeSim",
    "ResourceType",
    "VirtualClock",
    "format_time",
]
