"""kubesim: a stand-in Kubernetes API server for tests, the demo and trace replays.

It serves Pods, Nodes, batch Jobs and Kubeflow jobs over the real list / watch / patch /
delete protocol on loopback, on a virtual clock, and can be driven by public GPU traces.
"""

from kubesim.clock import DEFAULT_EPOCH, VirtualClock, format_time
from kubesim.resources import BATCH_JOBS, MPIJOBS, NODES, PODS, PYTORCHJOBS, TFJOBS, ResourceType
from kubesim.server import KubeSim

__all__ = [
    "BATCH_JOBS",
    "DEFAULT_EPOCH",
    "MPIJOBS",
    "NODES",
    "PODS",
    "PYTORCHJOBS",
    "TFJOBS",
    "KubeSim",
    "ResourceType",
    "VirtualClock",
    "format_time",
]
