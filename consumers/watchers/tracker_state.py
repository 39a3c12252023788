"""What the watcher's tracker remembers per object, as typed records, and their one codec.

The tracker (:mod:`consumers.watchers.tracker`) keeps one record per key — ``node/<name>``,
``job/<uid>``, ``workload/<uid>`` (a service or notebook), ``pod/<uid>`` and
``jobstart/<job uid>`` (a job start seen on a pod before its job) — and persists them as
JSON in ``watcher_objects`` (:mod:`consumers.watchers.checkpoints`). The stored JSON stays
compact (one- or two-letter keys, timestamps as ISO text); :func:`encode_state` and
:func:`decode_state` are the only places that know it, and decoding accepts every shape
earlier versions stored (docs/watchers.md, "Resume").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from ledger.errors import Invalid

__all__ = [
    "JobStart",
    "JobState",
    "NodeState",
    "PodState",
    "ReplicaSlot",
    "TrackedState",
    "WorkloadState",
    "decode_state",
    "encode_state",
]


@dataclass(frozen=True, slots=True)
class NodeState:
    """A node seen alive: which object it is (a name can be reused), cordoned, GPU model."""

    uid: str
    cordoned: bool
    flavor: str | None = None  # gpu/<model> from its product label; later occupancies take it


@dataclass(frozen=True, slots=True)
class ReplicaSlot:
    """The pod that last held a replica slot, and when it stopped (restart detection)."""

    pod_uid: str
    ended_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class JobState:
    """A job seen alive (a bare pod's job too, kind ``Pod``)."""

    kind: str
    name: str
    namespace: str
    started: bool = False  # JobStarted published
    outcome: str | None = None  # the outcome published: "succeeded" | "failed"
    replicas: Mapping[str, ReplicaSlot] = field(default_factory=dict)  # "<type>/<index>" ->
    # the suspension step published last: "queued" | "admitted" | "preempted" (None: never
    # suspended), and when it was last resumed (a pod after that is no restart)
    queue: str | None = None
    resumed_at: datetime | None = None

    def with_slot(self, replica: str, slot: ReplicaSlot) -> JobState:
        return replace(self, replicas={**self.replicas, replica: slot})


@dataclass(frozen=True, slots=True)
class PodState:
    """A pod seen alive: its job, its replica slot and how far its occupancy got."""

    name: str
    namespace: str
    job_uid: str
    job_kind: str
    bare: bool  # a pod with no owner: its own job
    replica: str = ""
    started_at: datetime | None = None  # OccupancyStarted published (the pod's scheduling time)
    ended: bool = False  # terminal, or OccupancyEnded published
    outcome: str | None = None  # a bare pod's job outcome published


@dataclass(frozen=True, slots=True)
class JobStart:
    """A pod of a job not seen yet started: the job's first sighting publishes JobStarted."""

    at: datetime
    job_kind: str


@dataclass(frozen=True, slots=True)
class WorkloadState:
    """A service or notebook seen alive, as last published: desired replicas and revision."""

    kind: str  # Deployment | StatefulSet | LeaderWorkerSet
    name: str
    namespace: str
    replicas: int
    revision: str


TrackedState = NodeState | JobState | PodState | JobStart | WorkloadState


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _parse_time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if value is not None else None


def encode_state(state: TrackedState) -> dict[str, Any]:
    """The JSON stored for ``state`` (the compact shape the tracker has always stored)."""
    match state:
        case NodeState():
            return {"uid": state.uid, "c": state.cordoned, "f": state.flavor}
        case JobState():
            return {
                "k": state.kind,
                "n": state.name,
                "ns": state.namespace,
                "st": state.started,
                "o": state.outcome,
                "rep": {r: [s.pod_uid, _time(s.ended_at)] for r, s in state.replicas.items()},
                **({"q": state.queue} if state.queue else {}),
                **({"ra": _time(state.resumed_at)} if state.resumed_at else {}),
            }
        case PodState():
            return {
                "n": state.name,
                "ns": state.namespace,
                "j": state.job_uid,
                "jk": state.job_kind,
                "bare": state.bare,
                "r": state.replica,
                "s": _time(state.started_at),
                "e": state.ended,
                "ph": state.outcome,
            }
        case JobStart():
            return {"at": state.at.isoformat(), "jk": state.job_kind}
        case WorkloadState():
            return {
                "k": state.kind,
                "n": state.name,
                "ns": state.namespace,
                "r": state.replicas,
                "rev": state.revision,
            }


def _slot(value: Any) -> ReplicaSlot:
    if isinstance(value, str):  # the first version stored the pod's uid alone
        return ReplicaSlot(value)
    pod_uid, ended_at = value
    return ReplicaSlot(pod_uid, _parse_time(ended_at))


def _decode(kind: str, value: Mapping[str, Any]) -> TrackedState:
    if kind == "node":  # "f" since issue 24 (node flavors)
        return NodeState(value["uid"], bool(value["c"]), value.get("f"))
    if kind == "job":
        return JobState(
            kind=value["k"],
            name=value["n"],
            namespace=value["ns"],
            started=bool(value.get("st")),
            outcome=value.get("o"),
            replicas={r: _slot(s) for r, s in (value.get("rep") or {}).items()},
            queue=value.get("q"),  # "q", "ra" since suspension facts (issue 27)
            resumed_at=_parse_time(value.get("ra")),
        )
    if kind == "pod":  # "r" since restart detection by replica slot
        return PodState(
            name=value.get("n") or "",
            namespace=value["ns"],
            job_uid=value["j"],
            job_kind=value["jk"],
            bare=bool(value.get("bare")),
            replica=value.get("r", ""),
            started_at=_parse_time(value["s"]),
            ended=bool(value["e"]),
            outcome=value.get("ph"),
        )
    if kind == "jobstart":
        return JobStart(datetime.fromisoformat(value["at"]), value.get("jk") or "Job")
    if kind == "workload":  # since services and notebooks (issue 46)
        return WorkloadState(
            kind=value["k"],
            name=value["n"],
            namespace=value["ns"],
            replicas=int(value["r"]),
            revision=str(value["rev"]),
        )
    raise Invalid(f"unknown kind {kind!r}")


def decode_state(key: str, value: Mapping[str, Any]) -> TrackedState:
    """The record stored as ``value`` under ``key``; a shape no version wrote is a
    one-line :class:`ValueError` naming the key."""
    kind = key.split("/", 1)[0]
    try:
        return _decode(kind, value)
    except (KeyError, TypeError, ValueError) as exc:
        detail = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise Invalid(f"watcher state {key!r} cannot be read: {detail}") from None
