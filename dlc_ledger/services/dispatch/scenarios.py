"""Dispatcher scenario files (``../shared/scenarios/README.md``): YAML into the decision
core's plain data, at the edge. Every problem is a :class:`ScenarioError` naming the field."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from dlc_ledger.services.yaml_files import YamlError, load_yaml
from ledger.dispatch import (
    DEFAULT_STRATEGIES,
    Admitted,
    BorrowWithin,
    Decision,
    FairSharingStrategy,
    Incoming,
    Preemption,
    QuotaNode,
    Snapshot,
    decide,
)
from ledger.errors import Invalid

__all__ = ["ScenarioError", "parse_scenario", "simulate_file"]

_WITHIN = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
_RECLAIM = ("Never", "LowerPriority", "Any")
_BORROW = ("Never", "LowerPriority")
_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
#: events.BillingMode's values; ``idle`` jobs borrow beyond their quota and go first
_BILLING = ("quota", "public", "spot", "idle")


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
    return {
        "job": w["job"],
        "quota": w["quota"],
        "priority": _int(w.get("priority", 0), f"{where}.priority"),
        "resources": _quantities(w.get("resources"), f"{where}.resources"),
        "billing_mode": mode,
    }


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


def parse_scenario(text: str) -> tuple[Snapshot, Incoming]:
    try:
        doc = _mapping(load_yaml(text), "scenario")
    except YamlError as exc:
        raise ScenarioError(str(exc)) from None
    fair, strategies = _fair_sharing(doc.get("fair_sharing"))
    quotas = doc.get("quotas")
    if not isinstance(quotas, list) or not quotas:
        raise ScenarioError("quotas: expected a non-empty list")
    admitted_raw = doc.get("admitted") or []
    if not isinstance(admitted_raw, list):
        raise ScenarioError("admitted: expected a list")
    admitted = tuple(
        Admitted(
            **_workload(a, f"admitted[{i}]"),
            admitted_at=_instant(
                cast(Mapping[str, Any], a).get("admitted_at"), f"admitted[{i}].admitted_at"
            ),
        )
        for i, a in enumerate(admitted_raw)
    )
    inc = _mapping(doc.get("incoming"), "incoming")
    incoming = Incoming(
        **_workload(inc, "incoming"),
        created_at=_instant(inc.get("created_at"), "incoming.created_at"),
    )
    snapshot = Snapshot(
        quotas=tuple(_quota(q, f"quotas[{i}]") for i, q in enumerate(quotas)),
        admitted=admitted,
        fair_sharing=fair,
        strategies=strategies,
    )
    return snapshot, incoming


def simulate_file(path: str | Path) -> Decision:
    """The dispatcher's decision for the scenario file at ``path``."""
    snapshot, incoming = parse_scenario(Path(path).read_text(encoding="utf-8"))
    return decide(snapshot, incoming)
