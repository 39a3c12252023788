"""``ops/grafana``'s dashboard and alert rules parse, and name only metrics the
processes define (a renamed metric breaks this test, not a dashboard at 3 a.m.)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

import consumers.billing_metrics
import consumers.dispatcher.metrics
import consumers.metrics
import consumers.notifications.metrics
import consumers.projector_metrics
import consumers.watchers.metrics  # noqa: F401 (each defines its metrics on import)
import dlc_ledger.api.metrics  # noqa: F401 (the API's: dlc_api_*)
from consumers.verify_metrics import write_verification
from tests.support.paths import ROOT

OPS = ROOT / "ops" / "grafana"
_NAME = re.compile(r"\bdlc_[a-z0-9_]+\b")
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def _exposed(tmp_path: Path) -> set[str]:
    """Every sample name the processes can serve, and the verify textfile's."""
    out: set[str] = set()
    for family in REGISTRY.collect():
        out.update(family.name + s for s in _SUFFIXES.get(family.type, ("",)))
    path = tmp_path / "verify.prom"
    write_verification(path, ok=True, checked=1)
    out.update(f.name for f in text_string_to_metric_families(path.read_text()))
    return {name for name in out if name.startswith("dlc_")}


def _dashboard_exprs() -> list[str]:
    dashboard = json.loads((OPS / "dlc-ledger.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    return exprs


def _rules() -> list[dict[str, object]]:
    doc = yaml.safe_load((OPS / "alerts.yml").read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def test_the_dashboard_uses_only_defined_metrics(tmp_path: Path) -> None:
    exposed = _exposed(tmp_path)
    used = {name for expr in _dashboard_exprs() for name in _NAME.findall(expr)}
    assert used and used <= exposed, used - exposed
    # the Kueue-named quota figures are all on it
    assert {
        "dlc_quota_resource_usage",
        "dlc_quota_nominal_quota",
        "dlc_quota_borrowed_resources",
        "dlc_quota_lent_resources",
        "dlc_pending_workloads",
        "dlc_admission_wait_time_seconds_bucket",
    } <= used


def test_the_alert_rules_are_complete_and_use_only_defined_metrics(tmp_path: Path) -> None:
    exposed = _exposed(tmp_path)
    rules = _rules()
    names = [str(r["alert"]) for r in rules]
    assert len(names) == len(set(names))
    for rule in rules:
        assert isinstance(rule["expr"], str) and rule["expr"].strip()
        used = set(_NAME.findall(rule["expr"]))
        assert used and used <= exposed, (rule["alert"], used - exposed)
        assert rule["labels"]["severity"] in {"warning", "critical"}  # type: ignore[index]
        assert rule["annotations"]["summary"]  # type: ignore[index]
    assert {
        "DlcIngestStalled",
        "DlcProjectionLag",
        "DlcDeadLettersGrowing",
        "DlcChainVerificationFailed",
        "DlcOverAdmission",
    } <= set(names)


def test_a_misspelt_metric_would_be_caught(tmp_path: Path) -> None:
    assert "dlc_quota_resource_usages" not in _exposed(tmp_path)
    assert "dlc_ingest_events_total" in _exposed(tmp_path)


#: each component's own metric families: the series its absent() rule names must be one
#: of its own (every process also exposes other components' unlabelled metrics at zero)
_OWN_PREFIXES = {
    "watch": ("dlc_watcher_", "dlc_producer_"),
    "ingest": ("dlc_ingest_",),
    "project": ("dlc_projector_", "dlc_projection_"),
    "billing": ("dlc_billing_",),
    "dispatch": ("dlc_dispatch_", "dlc_quota_", "dlc_pending_", "dlc_admission_"),
    "api": ("dlc_api_",),
    "notifications": ("dlc_notifications_",),
}
_ABSENT = re.compile(r'^absent\((dlc_[a-z0-9_]+)\{component="([a-z]+)"\}\)$')


def _served_components() -> dict[str, bool]:
    """Each deployed component (ops/kubernetes, production overlay) → whether Prometheus
    scrapes it (a metrics port, or the API's /metrics)."""
    from tests.support.manifests import OVERLAYS, component, main_container, of_kind, render

    production = next(p for p in OVERLAYS if p.name == "production")
    return {
        component(d): bool(main_container(d).get("ports"))
        for d in of_kind(render(production), "Deployment")
    }


def test_every_scraped_component_has_an_absent_alert(tmp_path: Path) -> None:
    exposed = _exposed(tmp_path)
    absent: dict[str, str] = {}
    for rule in _rules():
        match = _ABSENT.match(str(rule["expr"]).strip())
        if match:
            metric, component = match.groups()
            assert component not in absent, component
            absent[component] = metric
            assert metric in exposed
            assert metric.startswith(_OWN_PREFIXES[component]), (component, metric)
            assert rule["labels"]["severity"] == "critical"  # type: ignore[index]
            assert rule.get("for"), rule["alert"]
    served = _served_components()
    assert set(absent) == set(served)
    assert all(served.values())  # every component is scraped


def test_a_component_without_its_absent_alert_would_be_caught() -> None:
    assert _ABSENT.match('absent(dlc_ingest_events_total{component="ingest"})')
    assert not _ABSENT.match("absent(dlc_ingest_events_total)")  # no component: any process
