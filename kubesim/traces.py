"""Public GPU-cluster traces, mapped onto jobs the way DESIGN §8 fixes it.

Source: Alibaba PAI GPU traces (alibaba/clusterdata, CC BY 4.0): cluster-trace-gpu-v2023
(openb pods and nodes; Weng et al., USENIX ATC 2023) and cluster-trace-gpu-v2025
(disaggregated DLRM instances; Yang et al., NSDI 2025). The mapping is fixed so that a replay's
bill can be checked against the trace by hand:

- openb: one pod = one single-replica batch Job (training);
- DLRM: one app = one service (an apps/v1 Deployment named after the app, in the app's
  namespace) and one instance = one of its replicas (``TraceInstance.service`` names the
  Deployment, ``replica`` numbers the pod): the instance's creation scales the Deployment up
  by one and creates its pod, its deletion deletes the pod and scales it down by one
  (:class:`kubesim.driver.TraceDriver`; a closed loop still plays every row as a suspended
  Job, as the dispatcher admits jobs, not scale-ups);
- ``openb+dlrm``: both on one cluster from one epoch (:func:`combine`): training and
  inference side by side.

The bundled copies (``kubesim/data/``, attribution in its README) are package data, found
with :mod:`importlib.resources`, so an installed wheel replays them from any directory; a
caller may pass its own files or data directory instead.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TextIO

from kubesim.clock import DEFAULT_EPOCH

__all__ = [
    "DATA_DIR",
    "DLRM_CSV",
    "OPENB_NODES_CSV",
    "OPENB_PODS_CSV",
    "OPENB_PRIORITIES",
    "TRACE_NAMES",
    "Trace",
    "TraceFile",
    "TraceInstance",
    "TraceNode",
    "combine",
    "live_rows",
    "load_dlrm",
    "load_openb",
    "load_trace",
]

#: A trace file: a path, or a resource (a ``Traversable``, e.g. from package data).
TraceFile = Traversable | Path | str

DATA_DIR: Traversable = files("kubesim") / "data"
OPENB_PODS_CSV = DATA_DIR / "alibaba-gpu-v2023" / "openb_pod_list_default.csv"
OPENB_NODES_CSV = DATA_DIR / "alibaba-gpu-v2023" / "openb_node_list_all_node.csv"
DLRM_CSV = DATA_DIR / "alibaba-gpu-v2025" / "disaggregated_DLRM_trace.csv"

# Kubernetes-style priorities for the openb QoS classes (not part of the trace; documented in
# docs/kubesim.md): guaranteed > latency-sensitive > burstable > best-effort.
OPENB_PRIORITIES = {"Guaranteed": 300, "LS": 200, "Burstable": 100, "BE": 0}
DLRM_PRIORITY = 200


@dataclass(frozen=True)
class TraceNode:
    name: str
    gpus: int
    cpu_milli: int
    memory_mib: int
    gpu_model: str | None


@dataclass(frozen=True)
class TraceInstance:
    """One trace row as a single-replica job. Times are trace seconds (0 = the epoch)."""

    job_name: str
    source_name: str
    namespace: str
    workspace: str
    billing_mode: str
    user: str
    priority: int
    cpu_milli: int
    memory_mib: int
    gpu_milli: int
    gpus: int
    created: int
    scheduled: int | None
    deleted: int | None
    failed: bool = False
    pre_existing: bool = False
    annotations: tuple[tuple[str, str], ...] = ()
    # GPU models the row was constrained to (openb ``gpu_spec``, ``|``-separated); empty: any
    gpu_models: tuple[str, ...] = ()
    #: the Deployment (in ``namespace``) the row is a replica of; None: the row is its own Job
    service: str | None = None
    #: the replica's number, unique in its namespace (its pod's name ends with it)
    replica: int = 0

    @property
    def pod_name(self) -> str:
        """The pod of the row's Job (a service replica's pod is named by its ReplicaSet:
        :func:`kubesim.driver.pod_names`)."""
        return f"{self.job_name}-0"


@dataclass(frozen=True)
class Trace:
    name: str
    epoch: datetime
    nodes: tuple[TraceNode, ...]
    instances: tuple[TraceInstance, ...]
    end: int  # the largest timestamp in the file
    notes: dict[str, int] = field(default_factory=dict)
    #: ``(start, end)`` trace seconds of :meth:`between`'s window; None: the whole file
    window: tuple[int, int] | None = None

    def head(self, count: int) -> Trace:
        """The first `count` instances (for quick runs); nodes and end are kept."""
        return Trace(
            self.name, self.epoch, self.nodes, self.instances[:count], self.end, self.notes
        )

    def between(self, start: int, end: int) -> Trace:
        """The instances created in ``[start, end)`` (trace seconds), at their own times, so
        cluster time stays the full trace's; nodes and the file's end are kept (a row the
        trace never ended runs to it, as in the whole trace)."""
        if not 0 <= start < end:
            raise ValueError(f"a trace window starts before it ends ({start}, {end})")
        kept = tuple(i for i in self.instances if start <= i.created < end)
        return Trace(self.name, self.epoch, self.nodes, kept, self.end, self.notes, (start, end))


def _open(source: TraceFile) -> TextIO:
    """The file as text for :mod:`csv` (``newline=""``: line ends inside fields kept)."""
    resource = Path(source) if isinstance(source, str) else source
    return io.TextIOWrapper(resource.open("rb"), encoding="utf-8", newline="")


def _dns(name: str) -> str:
    return name.lower().replace("_", "-")


def load_openb(
    pods_csv: TraceFile = OPENB_PODS_CSV,
    nodes_csv: TraceFile = OPENB_NODES_CSV,
    epoch: datetime = DEFAULT_EPOCH,
) -> Trace:
    """openb: workspace `ws-<qos>`, idle for BE else public, mGPU = gpu_milli for 1 GPU;
    a `gpu_spec` (`A|B`) constrains the pod to nodes of those GPU models."""
    nodes = []
    with _open(nodes_csv) as fh:
        for row in csv.DictReader(fh):
            nodes.append(
                TraceNode(
                    name=row["sn"],
                    gpus=int(row["gpu"] or 0),
                    cpu_milli=int(row["cpu_milli"]),
                    memory_mib=int(row["memory_mib"]),
                    gpu_model=row["model"] or None,
                )
            )
    instances = []
    end = 0
    with _open(pods_csv) as fh:
        for row in csv.DictReader(fh):
            qos = row["qos"]
            num_gpu = int(row["num_gpu"] or 0)
            gpu_milli = int(row["gpu_milli"] or 0) if num_gpu == 1 else num_gpu * 1000
            workspace = f"ws-{qos.lower()}"
            created = int(row["creation_time"])
            scheduled = int(row["scheduled_time"]) if row["scheduled_time"] else None
            deleted = int(row["deletion_time"]) if row["deletion_time"] else None
            end = max(end, created, scheduled or 0, deleted or 0)
            instances.append(
                TraceInstance(
                    job_name=row["name"],
                    source_name=row["name"],
                    namespace=workspace,
                    workspace=workspace,
                    billing_mode="idle" if qos == "BE" else "public",
                    user="openb",
                    priority=OPENB_PRIORITIES.get(qos, 0),
                    cpu_milli=int(row["cpu_milli"]),
                    memory_mib=int(row["memory_mib"]),
                    gpu_milli=gpu_milli,
                    gpus=num_gpu,
                    created=created,
                    scheduled=scheduled,
                    deleted=deleted,
                    failed=row["pod_phase"] == "Failed",
                    annotations=(
                        ("dlc.ledger/qos", qos),
                        ("dlc.ledger/trace-phase", row["pod_phase"]),
                    ),
                    gpu_models=tuple(m for m in (row.get("gpu_spec") or "").split("|") if m),
                )
            )
    return Trace("openb", epoch, tuple(nodes), tuple(instances), end)


def _seconds(text: str) -> int | None:
    """Round to the nearest second (half up); the file carries float noise."""
    if not text.strip():
        return None
    return math.floor(float(text) + 0.5)


def _dlrm_nodes(instances: Iterable[TraceInstance], end: int) -> tuple[TraceNode, ...]:
    """DLRM has no node list: size a GPU pool and a CPU pool for the peak concurrent demand."""
    pools = {"gpu": (8, 128_000, 1_048_576), "cpu": (0, 256_000, 2_097_152)}
    deltas: dict[str, dict[int, list[int]]] = {"gpu": {}, "cpu": {}}
    largest = {"gpu": [0, 0, 0], "cpu": [0, 0, 0]}
    for inst in instances:
        pool = "gpu" if inst.gpu_milli else "cpu"
        start = inst.scheduled if inst.scheduled is not None else None
        if start is None:
            continue
        stop = inst.deleted if inst.deleted is not None else end + 1
        demand = (inst.gpu_milli, inst.cpu_milli, inst.memory_mib)
        for t, sign in ((start, 1), (stop, -1)):
            slot = deltas[pool].setdefault(t, [0, 0, 0])
            for i in range(3):
                slot[i] += sign * demand[i]
        largest[pool] = [max(a, b) for a, b in zip(largest[pool], demand, strict=True)]
    nodes: list[TraceNode] = []
    for pool, (gpus, cpu, mem) in pools.items():
        cpu = max(cpu, largest[pool][1])
        mem = max(mem, largest[pool][2])
        used = [0, 0, 0]
        peak = [0, 0, 0]
        for t in sorted(deltas[pool]):
            used = [u + d for u, d in zip(used, deltas[pool][t], strict=True)]
            peak = [max(p, u) for p, u in zip(peak, used, strict=True)]
        caps = (gpus * 1000, cpu, mem)
        need = max(math.ceil(p / c) for p, c in zip(peak, caps, strict=True) if c)
        count = math.ceil(need * 1.25) + 1
        for i in range(count):
            nodes.append(TraceNode(f"dlrm-{pool}-{i:04d}", gpus, cpu, mem, None))
    return tuple(nodes)


def load_dlrm(csv_path: TraceFile = DLRM_CSV, epoch: datetime = DEFAULT_EPOCH) -> Trace:
    """DLRM: one service per app (workspace = app_name, public), one replica per instance
    (numbered by its row); missing creation = running since second 0, missing deletion =
    still running at the trace end (the largest timestamp in the file)."""
    rows = []
    end = 0
    with _open(csv_path) as fh:
        for row in csv.DictReader(fh):
            times = [_seconds(row[k]) for k in ("creation_time", "scheduled_time", "deletion_time")]
            end = max([end, *[t for t in times if t is not None]])
            rows.append((row, times))
    instances = []
    clamped = 0
    for number, (row, (created, scheduled, deleted)) in enumerate(rows):
        pre_existing = created is None
        created_at = created if created is not None else 0
        scheduled_at = scheduled if scheduled is not None else created_at
        if scheduled_at < created_at:
            scheduled_at, clamped = created_at, clamped + 1
        if deleted is not None and deleted < scheduled_at:
            deleted, clamped = scheduled_at, clamped + 1
        workspace = row["app_name"]
        gpu_request = float(row["gpu_request"] or 0)
        instances.append(
            TraceInstance(
                job_name=_dns(row["instance_sn"]),
                source_name=row["instance_sn"],
                namespace=_dns(workspace),
                workspace=workspace,
                billing_mode="public",
                user=workspace,
                priority=DLRM_PRIORITY,
                cpu_milli=round(float(row["cpu_request"]) * 1000),
                memory_mib=round(float(row["memory_request"]) * 1024),
                gpu_milli=round(gpu_request * 1000),
                gpus=math.ceil(gpu_request),
                created=created_at,
                scheduled=scheduled_at,
                deleted=deleted,
                pre_existing=pre_existing,
                annotations=(("dlc.ledger/role", row["role"]),),
                service=_dns(workspace),
                replica=number,
            )
        )
    trace = Trace(
        "dlrm", epoch, _dlrm_nodes(instances, end), tuple(instances), end, {"clamped": clamped}
    )
    return trace


#: the names :func:`load_trace` knows
TRACE_NAMES = ("openb", "dlrm", "openb+dlrm")


def combine(name: str, *traces: Trace) -> Trace:
    """Several traces on one cluster: their nodes and rows side by side, from one epoch
    (second 0 of each is second 0 of all), to the latest end. Their namespaces, job and
    node names must not collide (openb's and DLRM's do not)."""
    if not traces:
        raise ValueError("combine needs at least one trace")
    epochs = {t.epoch for t in traces}
    if len(epochs) != 1:
        raise ValueError(f"traces combined on one cluster share one epoch, not {len(epochs)}")
    nodes = tuple(n for t in traces for n in t.nodes)
    if len({n.name for n in nodes}) != len(nodes):
        raise ValueError("the combined traces name the same node twice")
    rows = tuple(i for t in traces for i in t.instances)
    if len({(i.namespace, i.job_name) for i in rows}) != len(rows):
        raise ValueError("the combined traces name the same job twice")
    notes = {f"{t.name}.{k}": v for t in traces for k, v in t.notes.items()}
    return Trace(name, traces[0].epoch, nodes, rows, max(t.end for t in traces), notes)


def live_rows(
    trace: Trace,
    window: tuple[int, int],
    at: int | None = None,
    suffix: str = "-live",
    *,
    keep_services: bool = False,
) -> Trace:
    """``trace`` with a copy of the rows created in ``window`` (trace seconds, ``[start,
    end)``) appended, to be played live after it (a closed loop from ``at``:
    :class:`kubesim.closed_loop.ClosedLoopDriver`'s ``open_until``).

    Each copy is its row renamed ``<job_name><suffix>`` (so its Job, pod, uids and event
    ids are its own) and moved so the window starts at ``at`` (default: the first full hour
    after the trace's end), on the trace's own clock (one epoch). A copy is a Job of its own
    (a service's replica too), never pre-existing; with ``keep_services`` a service's
    replica stays a replica, of the service ``<service><suffix>`` (a copy of a DLRM app is
    a Deployment of its own, scaled up and down by its copies under the dispatcher). A row
    the trace never ended ends, in its copy, after the time it ran in the trace (to the
    trace's end). ``at`` must come after every row's creation,
    so ``open_until = at`` splits the history from the copies; the result's end is the
    later of the trace's and the copies' last second."""
    start, stop = window
    if not 0 <= start < stop:
        raise ValueError(f"a trace window starts before it ends ({start}, {stop})")
    at = (trace.end // 3600 + 1) * 3600 if at is None else at
    last = max((i.created for i in trace.instances), default=-1)
    if at <= last:
        raise ValueError(f"the live rows start at {at}, not after the trace's last creation {last}")
    shift = at - start
    copies = []
    for inst in trace.instances:
        if not start <= inst.created < stop:
            continue
        deleted = inst.deleted
        if deleted is None and inst.scheduled is not None:
            deleted = max(trace.end, inst.scheduled)
        copies.append(
            replace(
                inst,
                job_name=f"{inst.job_name}{suffix}",
                created=inst.created + shift,
                scheduled=None if inst.scheduled is None else inst.scheduled + shift,
                deleted=None if deleted is None else deleted + shift,
                pre_existing=False,
                service=f"{inst.service}{suffix}" if keep_services and inst.service else None,
                replica=inst.replica if keep_services else 0,
            )
        )
    rows = trace.instances + tuple(copies)
    if len({(i.namespace, i.job_name) for i in rows}) != len(rows):
        raise ValueError(f"a copy named with {suffix!r} has the name of a row of the trace")
    end = max([trace.end, *(max(i.created, i.scheduled or 0, i.deleted or 0) for i in copies)])
    return Trace(trace.name, trace.epoch, trace.nodes, rows, end, trace.notes)


def load_trace(
    name: str, epoch: datetime = DEFAULT_EPOCH, data_dir: Traversable | Path | None = None
) -> Trace:
    """`openb`, `dlrm` or both on one cluster, `openb+dlrm`, from the bundled data (or
    ``data_dir``, laid out the same way)."""
    base = data_dir or DATA_DIR
    if name == "openb+dlrm":
        return combine(name, load_trace("openb", epoch, base), load_trace("dlrm", epoch, base))
    if name == "openb":
        return load_openb(
            base / "alibaba-gpu-v2023" / "openb_pod_list_default.csv",
            base / "alibaba-gpu-v2023" / "openb_node_list_all_node.csv",
            epoch,
        )
    if name == "dlrm":
        return load_dlrm(base / "alibaba-gpu-v2025" / "disaggregated_DLRM_trace.csv", epoch)
    raise ValueError(f"unknown trace {name!r} ({', '.join(TRACE_NAMES)})")
