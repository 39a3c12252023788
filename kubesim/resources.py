"""The resource types kubesim serves, with the names the API paths and discovery use."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BATCH_JOBS",
    "DEPLOYMENTS",
    "LEADERWORKERSETS",
    "MPIJOBS",
    "NODES",
    "PODS",
    "PYTORCHJOBS",
    "RESOURCES",
    "STATEFULSETS",
    "TFJOBS",
    "ResourceType",
    "find_resource",
]


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        """Identity used by the store (`pods`, `batch/jobs`, `kubeflow.org/pytorchjobs`)."""
        return f"{self.group}/{self.plural}" if self.group else self.plural

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


PODS = ResourceType("", "v1", "pods", "Pod", True, ("po",))
NODES = ResourceType("", "v1", "nodes", "Node", False, ("no",))
BATCH_JOBS = ResourceType("batch", "v1", "jobs", "Job", True)
PYTORCHJOBS = ResourceType("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", True)
TFJOBS = ResourceType("kubeflow.org", "v1", "tfjobs", "TFJob", True)
MPIJOBS = ResourceType("kubeflow.org", "v1", "mpijobs", "MPIJob", True)
# services and notebooks (docs/workloads.md)
DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment", True, ("deploy",))
STATEFULSETS = ResourceType("apps", "v1", "statefulsets", "StatefulSet", True, ("sts",))
LEADERWORKERSETS = ResourceType(
    "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", True, ("lws",)
)

RESOURCES: tuple[ResourceType, ...] = (
    PODS,
    NODES,
    BATCH_JOBS,
    PYTORCHJOBS,
    TFJOBS,
    MPIJOBS,
    DEPLOYMENTS,
    STATEFULSETS,
    LEADERWORKERSETS,
)


def find_resource(group: str, version: str, plural: str) -> ResourceType | None:
    for res in RESOURCES:
        if res.group == group and res.version == version and res.plural == plural:
            return res
    return None
