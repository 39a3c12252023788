"""Dispatcher scenario files (``../shared/scenarios/README.md``, ``data/scenarios/README.md``):
YAML into the decision core's plain data, at the edge. Every problem is a
:class:`ScenarioError` naming the field.

Two forms: one decision (``incoming``: :func:`parse_scenario`), or cycles (``pending``:
:func:`parse_cycles`, :func:`run_cycles`) — the dispatcher's cycles replayed until nothing
changes, each preemption's victims stopping (and queueing again) before the next cycle, and
a preemption report: who preempted whom, by which rule, and the work it lost."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from dlc_ledger.services.yaml_files import YamlError, load_yaml
from ledger.dispatch import (
    DEFAULT_STRATEGIES,
    Admitted,
    BorrowWithin,
    CycleInput,
    Decision,
    FairSharingStrategy,
    Incoming,
    Preemption,
    QueueSettings,
    QuotaNode,
    Snapshot,
    decide,
    plan_cycle,
    replica_unit,
)
from ledger.errors import Invalid

__all__ = [
    "CycleRun",
    "CycleScenario",
    "ScenarioError",
    "parse_cycles",
    "parse_scenario",
    "run_cycles",
    "simulate_file",
]

_WITHIN = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
_RECLAIM = ("Never", "LowerPriority", "Any")
_BORROW = ("Never", "LowerPriority")
_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
#: events.BillingMode's values; ``idle`` jobs borrow beyond their quota and go first
_BILLING = ("quota", "public", "spot", "idle")
#: ledger.dispatch.WorkloadClass: training jobs, notebooks, a service's replicas
_CLASSES = ("job", "notebook", "service")


class ScenarioError(Invalid):
    """A scenario file that is not valid."""


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ScenarioError(f"{where}: expected a mapping")
    return value


def _quantities(value: Any, where: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in _mapping(value, where).items():
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
            raise ScenarioError(f"{where}.{k}: expected a non-negative number")
        out[str(k)] = v
    return out


def _choice(value: Any, allowed: tuple[str, ...], where: str) -> Any:
    value = "Never" if value is None else value
    if value not in allowed:
        raise ScenarioError(f"{where}: expected one of {', '.join(allowed)}")
    return value


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(f"{where}: expected an integer")
    return value


def _instant(value: Any, where: str) -> datetime:
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ScenarioError(f"{where}: not an ISO 8601 instant") from None
    else:
        raise ScenarioError(f"{where}: expected an ISO 8601 instant")
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _quota(raw: Any, where: str) -> QuotaNode:
    q = _mapping(raw, where)
    name = q.get("name")
    if not isinstance(name, str) or not name:
        raise ScenarioError(f"{where}.name: required")
    p = _mapping(q.get("preemption"), f"{where}.preemption")
    bw = _mapping(p.get("borrow_within"), f"{where}.preemption.borrow_within")
    threshold = bw.get("max_priority_threshold")
    weight = q.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        raise ScenarioError(f"{where}.weight: expected a number")
    parent = q.get("parent")
    if parent is not None and not isinstance(parent, str):
        raise ScenarioError(f"{where}.parent: expected a quota name")
    return QuotaNode(
        name=name,
        parent=parent,
        min=_quantities(q["min"], f"{where}.min") if q.get("min") is not None else None,
        max=_quantities(q.get("max"), f"{where}.max"),
        lend_limit=_quantities(q.get("lend_limit"), f"{where}.lend_limit"),
        preemption=Preemption(
            within_quota=_choice(p.get("within_quota"), _WITHIN, f"{where}.within_quota"),
            reclaim=_choice(p.get("reclaim"), _RECLAIM, f"{where}.reclaim"),
            borrow_within=BorrowWithin(
                policy=_choice(bw.get("policy"), _BORROW, f"{where}.borrow_within.policy"),
                max_priority_threshold=None
                if threshold is None
                else _int(threshold, f"{where}.borrow_within.max_priority_threshold"),
            ),
        ),
        weight=float(weight),
    )


def _workload(raw: Any, where: str) -> dict[str, Any]:
    w = _mapping(raw, where)
    for key in ("job", "quota"):
        if not isinstance(w.get(key), str):
            raise ScenarioError(f"{where}.{key}: required")
    mode = w.get("billing_mode", "public")
    if mode not in _BILLING:
        raise ScenarioError(f"{where}.billing_mode: expected one of {', '.join(_BILLING)}")
    kind = w.get("workload", "job")
    if kind not in _CLASSES:
        raise ScenarioError(f"{where}.workload: expected one of {', '.join(_CLASSES)}")
    return {
        "job": w["job"],
        "quota": w["quota"],
        "priority": _int(w.get("priority", 0), f"{where}.priority"),
        "resources": _quantities(w.get("resources"), f"{where}.resources"),
        "billing_mode": mode,
        "workload": kind,
    }


def _admitted(raw: Any, where: str) -> list[Admitted]:
    """One admitted entry; a service's ``replicas: N`` is its N running replicas, each a
    unit (``<job>#0`` ...) with ``resources`` as one replica's."""
    fields = _workload(raw, where)
    at = _instant(cast(Mapping[str, Any], raw).get("admitted_at"), f"{where}.admitted_at")
    count = _replicas(raw, where)
    if count is None:
        return [Admitted(**fields, admitted_at=at)]
    return [
        Admitted(**{**fields, "job": replica_unit(fields["job"], i)}, admitted_at=at)
        for i in range(count)
    ]


def _replicas(raw: Any, where: str) -> int | None:
    w = cast(Mapping[str, Any], raw)
    if "replicas" not in w:
        return None
    if w.get("workload") != "service":
        raise ScenarioError(f"{where}.replicas: only a service has replicas")
    count = _int(w["replicas"], f"{where}.replicas")
    if count < 0:
        raise ScenarioError(f"{where}.replicas: expected a non-negative integer")
    return count


def _pending(raw: Any, where: str) -> list[Incoming]:
    """One pending entry; a service's ``scale: {from: A, to: B}`` is a scale-up's pending
    replicas ``<job>#A`` ... ``<job>#B-1``, each a unit of admission; ``spillover: true``
    (a service only) lets them run on public resources beyond the quota."""
    fields = _workload(raw, where)
    w = cast(Mapping[str, Any], raw)
    at = _instant(w.get("created_at"), f"{where}.created_at")
    spillover = w.get("spillover", False)
    if not isinstance(spillover, bool):
        raise ScenarioError(f"{where}.spillover: expected true or false")
    if spillover and fields["workload"] != "service":
        raise ScenarioError(f"{where}.spillover: only a service spills over")
    fields["spillover"] = spillover
    if "scale" not in w:
        return [Incoming(**fields, created_at=at)]
    if fields["workload"] != "service":
        raise ScenarioError(f"{where}.scale: only a service scales")
    scale = _mapping(w["scale"], f"{where}.scale")
    low = _int(scale.get("from"), f"{where}.scale.from")
    high = _int(scale.get("to"), f"{where}.scale.to")
    if not 0 <= low <= high:
        raise ScenarioError(f"{where}.scale: expected 0 <= from <= to")
    return [
        Incoming(**{**fields, "job": replica_unit(fields["job"], i)}, created_at=at)
        for i in range(low, high)
    ]


def _fair_sharing(value: Any) -> tuple[bool, tuple[FairSharingStrategy, ...]]:
    fair = _mapping(value, "fair_sharing")
    enabled = fair.get("enabled", False)
    if not isinstance(enabled, bool):
        raise ScenarioError("fair_sharing.enabled: expected true or false")
    raw = fair.get("preemption_strategies", fair.get("preemptionStrategies"))
    if raw is None:
        return enabled, DEFAULT_STRATEGIES
    if not isinstance(raw, list) or not 1 <= len(raw) <= 2:
        raise ScenarioError("fair_sharing.preemption_strategies: expected a list of one or two")
    for i, name in enumerate(raw):
        if name not in _STRATEGIES:
            raise ScenarioError(
                f"fair_sharing.preemption_strategies[{i}]: expected one of {', '.join(_STRATEGIES)}"
            )
    return enabled, tuple(cast(FairSharingStrategy, name) for name in raw)


def _document(text: str) -> Mapping[str, Any]:
    try:
        return _mapping(load_yaml(text), "scenario")
    except YamlError as exc:
        raise ScenarioError(str(exc)) from None


def _snapshot(doc: Mapping[str, Any]) -> Snapshot:
    """The tree and what runs on it (``quotas``, ``admitted``, ``fair_sharing``)."""
    fair, strategies = _fair_sharing(doc.get("fair_sharing"))
    quotas = doc.get("quotas")
    if not isinstance(quotas, list) or not quotas:
        raise ScenarioError("quotas: expected a non-empty list")
    admitted_raw = doc.get("admitted") or []
    if not isinstance(admitted_raw, list):
        raise ScenarioError("admitted: expected a list")
    admitted = tuple(
        wl for i, a in enumerate(admitted_raw) for wl in _admitted(a, f"admitted[{i}]")
    )
    return Snapshot(
        quotas=tuple(_quota(q, f"quotas[{i}]") for i, q in enumerate(quotas)),
        admitted=admitted,
        fair_sharing=fair,
        strategies=strategies,
    )


def parse_scenario(text: str) -> tuple[Snapshot, Incoming]:
    doc = _document(text)
    snapshot = _snapshot(doc)
    inc = _mapping(doc.get("incoming"), "incoming")
    incoming = Incoming(
        **_workload(inc, "incoming"),
        created_at=_instant(inc.get("created_at"), "incoming.created_at"),
    )
    return snapshot, incoming


@dataclass(frozen=True)
class CycleScenario:
    """A cycle scenario: the tree, what runs, what waits, and how many cycles at most."""

    snapshot: Snapshot
    pending: tuple[Incoming, ...]
    now: datetime
    queues: Mapping[str, QueueSettings] = field(default_factory=dict)
    cycles: int = 10
    cycle_seconds: int = 60


def parse_cycles(text: str) -> CycleScenario:
    """A scenario of the cycle form (``pending`` instead of ``incoming``)."""
    doc = _document(text)
    pending_raw = doc.get("pending")
    if not isinstance(pending_raw, list):
        raise ScenarioError("pending: expected a list")
    snapshot = _snapshot(doc)
    pending = tuple(job for i, p in enumerate(pending_raw) for job in _pending(p, f"pending[{i}]"))
    latest = max((p.created_at for p in pending), default=datetime(2026, 1, 1, tzinfo=UTC))
    now = _instant(doc["now"], "now") if doc.get("now") is not None else latest
    queues: dict[str, QueueSettings] = {}
    for i, q in enumerate(cast(list[Any], doc["quotas"])):
        policy = _mapping(q, f"quotas[{i}]").get("queue_policy")
        if policy is not None:
            try:
                queues[str(q["name"])] = QueueSettings(policy=policy)
            except Invalid as exc:
                raise ScenarioError(f"quotas[{i}].queue_policy: {exc}") from None
    cycles = _int(doc.get("cycles", 10), "cycles")
    seconds = _int(doc.get("cycle_seconds", 60), "cycle_seconds")
    if cycles < 1 or seconds < 1:
        raise ScenarioError("cycles and cycle_seconds: expected positive integers")
    return CycleScenario(snapshot, pending, now, queues, cycles, seconds)


@dataclass(frozen=True)
class CycleRun:
    """What :func:`run_cycles` saw: each cycle's decisions and the preemption report."""

    cycles: tuple[dict[str, Any], ...]
    report: tuple[dict[str, Any], ...]

    def as_document(self) -> dict[str, object]:
        return {"cycles": list(self.cycles), "preemptions": list(self.report)}


def _gpus(resources: Mapping[str, float]) -> float:
    """The GPUs of a request: its ``gpu`` and ``gpu/<flavor>`` keys, in the scenario's unit."""
    return sum(v for k, v in resources.items() if k == "gpu" or k.startswith("gpu/"))


def run_cycles(scenario: CycleScenario) -> CycleRun:
    """The dispatcher's cycles over ``scenario`` until nothing changes (or its ``cycles``):
    a preemption's victims stop before the next cycle (the work they did is lost) and
    queue again; its preemptor is admitted on its reservation; a refused notebook leaves."""
    quotas = scenario.snapshot.quotas
    admitted = {wl.job: wl for wl in scenario.snapshot.admitted}
    pending = {p.job: p for p in scenario.pending}
    reserved: set[str] = set()
    now = scenario.now
    cycles: list[dict[str, Any]] = []
    report: list[dict[str, Any]] = []
    for n in range(1, scenario.cycles + 1):
        result = plan_cycle(
            CycleInput(
                quotas,
                tuple(admitted.values()),
                tuple(pending.values()),
                now,
                queues=scenario.queues,
                reserved=frozenset(reserved),
                requeue=frozenset(q.name for q in quotas),
                fair_sharing=scenario.snapshot.fair_sharing,
            )
        )
        cycles.append(
            {
                "cycle": n,
                "at": now.isoformat(),
                "admitted": [d.job for d in result.admissions],
                # of those, the replicas admitted on public resources, beyond the quota
                "spilled": [d.job for d in result.admissions if d.spillover],
                "preemptions": [d.as_document() for d in result.preemptions],
                "pending": [
                    {"job": p.job, "quota": p.quota, "reason": p.reason, "position": p.position}
                    for p in result.pending
                ],
                "refused": [
                    {"job": r.job, "quota": r.quota, "reason": r.reason} for r in result.refused
                ],
            }
        )
        for d in result.admissions:
            job = pending.pop(d.job)
            reserved.discard(d.job)
            if d.spillover:
                continue  # on public resources: it counts against no quota
            admitted[d.job] = job.admitted(now)
        for r in result.refused:
            del pending[r.job]
        for d in result.preemptions:
            preemptor = pending[d.job]
            reserved.add(d.job)
            for v in d.victims:
                victim = admitted.pop(v.job)
                lost = (now - victim.admitted_at).total_seconds()
                report.append(
                    {
                        "cycle": n,
                        "at": now.isoformat(),
                        "preemptor": preemptor.job,
                        "preemptor_workload": preemptor.workload,
                        "preemptor_quota": preemptor.quota,
                        "preemptor_priority": preemptor.priority,
                        "victim": victim.job,
                        "victim_workload": victim.workload,
                        "victim_quota": victim.quota,
                        "victim_priority": victim.priority,
                        "reason": v.reason,
                        "lost_seconds": int(lost),
                        "lost_gpu_hours": round(_gpus(victim.resources) * lost / 3600, 6),
                    }
                )
                # a preempted job queues again (Kueue requeues an evicted workload)
                pending[victim.job] = Incoming(
                    victim.job,
                    victim.quota,
                    victim.priority,
                    victim.resources,
                    now,
                    victim.workspace,
                    victim.billing_mode,
                    victim.workload,
                )
        if not (result.admissions or result.preemptions or result.refused):
            break
        now += timedelta(seconds=scenario.cycle_seconds)
    return CycleRun(tuple(cycles), tuple(report))


def simulate_file(path: str | Path) -> Decision | CycleRun:
    """The dispatcher's decision for the scenario file at ``path``; for a cycle scenario
    (``pending``), its cycles and preemption report."""
    text = Path(path).read_text(encoding="utf-8")
    if "pending" in _document(text):
        return run_cycles(parse_cycles(text))
    snapshot, incoming = parse_scenario(text)
    return decide(snapshot, incoming)
