"""Every overlay of ``ops/kubernetes`` renders with ``kubectl kustomize`` and every object it
renders validates against the Kubernetes schemas (``kubernetes-validate``, strict: an
unknown field is an error), and the manifests say what the code does: each container runs
a real command with options it has, each probe asks a port the command serves, each pod
gets only its database login, and only the watcher and the dispatcher get a token for the
Kubernetes API."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import typer
import yaml

from dlc_ledger.cli.app import app
from tests.support.manifests import (
    BASE,
    OVERLAYS,
    ROOT,
    Manifest,
    RenderFailed,
    component,
    main_container,
    named,
    of_kind,
    render,
    workloads,
)

#: the oldest Kubernetes these manifests support and the newest the validator knows
VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
#: kinds validated without a schema: none. The manifests create no custom resource
#: (Kubeflow's kinds only appear in the RBAC rules); a kind added here is one the
#: validator has no schema for, named so that it is skipped knowingly
WITHOUT_SCHEMA: frozenset[str] = frozenset()
#: Secrets the pods name that an overlay may leave to the operator (ops/README.md,
#: "Secrets"); optional ones the pods start without
OUT_OF_BAND = {
    "dlc-ledger-db-owner",
    "dlc-ledger-db-writer",
    "dlc-ledger-db-reader",
    "dlc-ledger-kafka",
    "dlc-ledger-notifications",
}
#: who may talk to the Kubernetes API (rbac-watch.yaml, rbac-dispatch.yaml)
KUBE_API_CLIENTS = {"watch", "dispatch"}
COMPONENTS = {"watch", "ingest", "project", "billing", "dispatch", "notifications", "api"}


@pytest.fixture(scope="module", params=OVERLAYS, ids=lambda p: p.name)
def rendered(request: pytest.FixtureRequest) -> list[Manifest]:
    return render(request.param)


def validate_all(objects: list[Manifest]) -> list[str]:
    """Validate each object against each version; the kinds skipped for want of a schema."""
    skipped = []
    for obj in objects:
        for version in VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.SchemaNotFoundError:
                skipped.append(f"{obj['apiVersion']}/{obj['kind']}")
    return skipped


def test_there_are_overlays_for_development_and_production() -> None:
    assert {p.name for p in OVERLAYS} >= {"dev", "production"}


def test_every_rendered_object_validates(rendered: list[Manifest]) -> None:
    assert len(rendered) > 30
    skipped = validate_all(rendered)
    assert set(skipped) <= WITHOUT_SCHEMA, skipped


def test_the_validation_versions_are_ones_the_validator_ships() -> None:
    for version in VERSIONS:
        kubernetes_validate.validate(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}, version, True
        )


def _broken(tmp_path: Path, change: Any) -> list[Manifest]:
    """The production overlay's API Deployment, changed, rendered alone from a temp dir."""
    deployment = named(render(OVERLAYS[-1]), "Deployment", "dlc-ledger-api")
    change(deployment)
    (tmp_path / "broken.yaml").write_text(yaml.safe_dump(deployment))
    (tmp_path / "kustomization.yaml").write_text("resources: [broken.yaml]\n")
    return render(tmp_path)


def _spec(d: Manifest) -> dict[str, Any]:
    return dict(d["spec"]["template"]["spec"])


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda d: d["spec"].update(replicas="two"), id="a string for an integer"),
        pytest.param(lambda d: d["spec"].update(replica=2), id="an unknown field"),
        pytest.param(
            lambda d: d["spec"]["template"]["spec"]["containers"][0].pop("name"),
            id="a container without a name",
        ),
        pytest.param(
            lambda d: d["spec"]["template"]["spec"]["containers"][0]["ports"][0].update(
                containerPort="http"
            ),
            id="a port by name where a number goes",
        ),
    ],
)
def test_a_broken_manifest_fails_validation(tmp_path: Path, change: Any) -> None:
    objects = _broken(tmp_path, change)
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_all(objects)


def test_an_overlay_that_does_not_render_fails(tmp_path: Path) -> None:
    shutil.copytree(OVERLAYS[-1], tmp_path / "overlay")
    (tmp_path / "overlay" / "kustomization.yaml").write_text(
        (OVERLAYS[-1] / "kustomization.yaml")
        .read_text()
        .replace("../../base", os.path.relpath(BASE, tmp_path / "overlay"))
        .replace("resources.yaml", "missing.yaml")
    )
    with pytest.raises(RenderFailed, match=r"missing\.yaml"):
        render(tmp_path / "overlay")


def parse_command(args: list[str]) -> dict[str, Any]:
    """The options ``dlc-ledger ARGS`` would run with; an unknown command or option, or a
    value of the wrong type, raises the CLI's usage error."""
    cmd: Any = typer.main.get_command(app)
    ctx = cmd.context_class(cmd, info_name="dlc-ledger")
    rest = list(args)
    while True:
        name, rest = rest[0], rest[1:]
        sub = cmd.get_command(ctx, name)
        assert sub is not None, f"no command {name!r} in {args}"
        if hasattr(sub, "list_commands") and rest and not rest[0].startswith("-"):
            cmd, ctx = sub, sub.context_class(sub, info_name=name, parent=ctx)
            continue
        return dict(sub.make_context(name, rest, parent=ctx).params)


def test_the_command_parser_refuses_what_the_cli_would() -> None:
    assert parse_command(["watch", "--metrics-port=9100"])["metrics_port"] == 9100
    with pytest.raises(Exception, match="No such option"):
        parse_command(["watch", "--metrics-portt=9100"])
    with pytest.raises(Exception, match="valid integer"):
        parse_command(["ingest", "--metrics-port=metrics"])


def test_each_component_runs_its_command(rendered: list[Manifest]) -> None:
    expected = {
        "watch": ["watch"],
        "ingest": ["ingest"],
        "project": ["project"],
        "billing": ["billing", "serve"],
        "dispatch": ["dispatch"],
        "notifications": ["notifications", "send"],
        "api": ["api", "serve"],
        "migrate": ["db", "upgrade"],
    }
    seen = {}
    for workload in workloads(rendered):
        args = main_container(workload)["args"]
        seen[component(workload)] = [a for a in args if not a.startswith("-")][:2]
        parse_command(args)  # raises on an option the command does not have
    assert {c: a[: len(expected[c])] for c, a in seen.items()} == expected
    follow = [parse_command(main_container(w)["args"]) for w in workloads(rendered)]
    assert all(p.get("follow", True) for p in follow)  # project, dispatch: long-running
    assert all(p.get("workers", 1) >= 1 for p in follow)


def _port(container: Manifest, name_or_number: Any) -> int:
    if isinstance(name_or_number, int):
        return name_or_number
    found = [p["containerPort"] for p in container.get("ports", []) if p["name"] == name_or_number]
    assert len(found) == 1, (container["name"], name_or_number)
    return int(found[0])


def test_probes_ask_what_the_command_serves(rendered: list[Manifest]) -> None:
    probed = set()
    for workload in of_kind(rendered, "Deployment"):
        container = main_container(workload)
        options = parse_command(container["args"])
        served = {}
        if options.get("metrics_port"):
            served[options["metrics_port"]] = "/metrics"
        if "host" in options:  # api serve: on every interface, the dashboard at /
            assert options["host"] == "0.0.0.0"
            served[options["port"]] = "/"
        declared = {p["containerPort"] for p in container.get("ports", [])}
        assert declared == set(served), workload["metadata"]["name"]
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            probe = container.get(kind)
            if probe is None:
                continue
            assert set(probe) - {"periodSeconds", "timeoutSeconds", "failureThreshold"} == {
                "httpGet"
            }, (workload["metadata"]["name"], kind)
            port = _port(container, probe["httpGet"]["port"])
            assert served.get(port) == probe["httpGet"]["path"], workload["metadata"]["name"]
            probed.add(component(workload))
    assert probed == COMPONENTS  # every component serves HTTP, and is probed on it


def test_metrics_are_reachable_where_they_are_scraped(rendered: list[Manifest]) -> None:
    """A metrics port listens on loopback unless DLC_METRICS_HOST says otherwise."""
    settings = of_kind(rendered, "ConfigMap")
    assert [c["data"].get("DLC_METRICS_HOST") for c in settings] == ["0.0.0.0"]
    for workload in of_kind(rendered, "Deployment"):
        container = main_container(workload)
        [source] = container["envFrom"][:1]
        assert source["configMapRef"]["name"] == settings[0]["metadata"]["name"]
        port = parse_command(container["args"]).get("metrics_port")
        annotations = workload["spec"]["template"]["metadata"].get("annotations", {})
        if port:
            assert annotations.get("prometheus.io/port") == str(port)
            service = named(rendered, "Service", f"{workload['metadata']['name']}-metrics")
            assert service["spec"]["ports"][0]["port"] == port
        else:
            assert "prometheus.io/scrape" not in annotations


def _secret_refs(workload: Manifest) -> dict[str, set[str]]:
    """Env variable → the Secrets it comes from (envFrom: every variable of one)."""
    container = main_container(workload)
    refs: dict[str, set[str]] = {}
    for env in container.get("env", []):
        ref = (env.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            refs.setdefault(env["name"], set()).add(ref["name"])
    for source in container.get("envFrom", []):
        if "secretRef" in source:
            refs.setdefault("*", set()).add(source["secretRef"]["name"])
    return refs


def _base_name(name: str, rendered: list[Manifest]) -> str:
    """A generated Secret's name without kustomize's hash suffix."""
    for secret in of_kind(rendered, "Secret"):
        if secret["metadata"]["name"] == name:
            return name.rsplit("-", 1)[0] if name.rsplit("-", 1)[0] in OUT_OF_BAND else name
    return name


def test_each_pod_gets_only_its_database_login(rendered: list[Manifest]) -> None:
    present = {s["metadata"]["name"] for s in of_kind(rendered, "Secret")}
    logins: dict[str, dict[str, str]] = {}
    for workload in workloads(rendered):
        refs = _secret_refs(workload)
        for names in refs.values():
            for name in names:
                # every Secret a pod names is rendered here or created by the operator
                assert name in present or name in OUT_OF_BAND, name
        logins[component(workload)] = {
            var: _base_name(next(iter(names)), rendered)
            for var, names in refs.items()
            if var.startswith("DATABASE_URL")
        }
    writer = {"DATABASE_URL": "dlc-ledger-db-writer"}
    assert logins == {
        "migrate": {"DATABASE_URL": "dlc-ledger-db-owner"},
        "watch": writer,
        "ingest": writer,
        "project": writer,
        "billing": writer,
        "dispatch": writer,
        "notifications": writer,
        "api": {
            "DATABASE_URL": "dlc-ledger-db-reader",
            "DATABASE_URL_READER": "dlc-ledger-db-reader",
            "DATABASE_URL_WRITER": "dlc-ledger-db-writer",
        },
    }


def test_the_secrets_to_create_are_documented() -> None:
    readme = (ROOT / "ops" / "README.md").read_text()
    for name in OUT_OF_BAND:
        assert f"`{name}`" in readme, name


def test_only_the_cluster_clients_get_a_token(rendered: list[Manifest]) -> None:
    accounts = {a["metadata"]["name"]: a for a in of_kind(rendered, "ServiceAccount")}
    used = {}
    for workload in workloads(rendered):
        spec = _spec(workload)
        account = accounts[spec["serviceAccountName"]]
        used[component(workload)] = spec["serviceAccountName"]
        token = spec.get("automountServiceAccountToken", account["automountServiceAccountToken"])
        assert token is (component(workload) in KUBE_API_CLIENTS), component(workload)
    # one account per component, none shared, none unused
    assert len(set(used.values())) == len(used) == len(accounts)
    subjects = {
        s["name"]
        for b in of_kind(rendered, "ClusterRoleBinding") + of_kind(rendered, "RoleBinding")
        for s in b["subjects"]
    }
    assert subjects == {used[c] for c in KUBE_API_CLIENTS}


def test_every_pod_runs_restricted(rendered: list[Manifest]) -> None:
    [namespace] = of_kind(rendered, "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for workload in workloads(rendered):
        spec = _spec(workload)
        assert spec["securityContext"]["runAsNonRoot"] is True
        for container in spec["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False
            assert context["readOnlyRootFilesystem"] is True
            assert context["capabilities"]["drop"] == ["ALL"]
            mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
            assert "/tmp" in mounts
            resources = container.get("resources", {})
            assert resources.get("requests", {}).get("memory"), workload["metadata"]["name"]
            assert resources.get("limits", {}).get("memory"), workload["metadata"]["name"]


def test_network_policies_deny_by_default(rendered: list[Manifest]) -> None:
    policies = of_kind(rendered, "NetworkPolicy")
    deny = [p for p in policies if p["spec"]["podSelector"] == {}]
    assert len(deny) == 1 and set(deny[0]["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert "ingress" not in deny[0]["spec"] and "egress" not in deny[0]["spec"]
    # the components a policy names exist, and every component may reach the database
    named_components = set()
    for policy in policies:
        for expr in policy["spec"]["podSelector"].get("matchExpressions", []):
            named_components.update(expr["values"])
    assert named_components <= COMPONENTS
    postgres = named(rendered, "NetworkPolicy", "dlc-ledger-postgres")
    assert postgres["spec"]["podSelector"] == {
        "matchLabels": {"app.kubernetes.io/name": "dlc-ledger"}
    }


def test_disruption_budgets_cover_the_replicated_components(rendered: list[Manifest]) -> None:
    replicated = {
        component(d) for d in of_kind(rendered, "Deployment") if d["spec"].get("replicas", 1) > 1
    }
    budgets = {component(b) for b in of_kind(rendered, "PodDisruptionBudget")}
    assert budgets == replicated
    for budget in of_kind(rendered, "PodDisruptionBudget"):
        assert budget["spec"]["minAvailable"] == 1


def _meta_labels(workload: Manifest, port: Manifest, namespace: str) -> dict[str, str]:
    """What Prometheus's Kubernetes pod discovery labels one container port of a pod of
    ``workload`` with (the subset the scrape config reads)."""
    template = workload["spec"]["template"]["metadata"]

    def sanitized(name: str) -> str:
        return "".join(ch if ch.isalnum() else "_" for ch in name)

    meta = {"__meta_kubernetes_namespace": namespace, "__meta_kubernetes_pod_name": "p-0"}
    for key, value in template.get("labels", {}).items():
        meta[f"__meta_kubernetes_pod_label_{sanitized(key)}"] = value
    for key, value in template.get("annotations", {}).items():
        meta[f"__meta_kubernetes_pod_annotation_{sanitized(key)}"] = value
    meta["__meta_kubernetes_pod_container_port_name"] = port.get("name", "")
    return meta


def _relabel(meta: dict[str, str], rules: list[dict[str, Any]]) -> dict[str, str] | None:
    """Prometheus's keep and replace relabelings (the two the config uses); None: dropped."""
    labels = dict(meta)
    for rule in rules:
        value = rule.get("separator", ";").join(labels.get(s, "") for s in rule["source_labels"])
        match = re.fullmatch(rule.get("regex", "(.*)"), value)
        action = rule.get("action", "replace")
        if action == "keep":
            if not match:
                return None
        elif action == "replace":
            if match:
                replacement = rule.get("replacement", "$1").replace("$1", r"\1")
                labels[rule["target_label"]] = match.expand(replacement)
        else:
            raise AssertionError(f"relabel action {action} not modelled here")
    return {k: v for k, v in labels.items() if not k.startswith("__")}


def test_the_scrape_config_finds_every_metrics_endpoint(rendered: list[Manifest]) -> None:
    config = yaml.safe_load((ROOT / "ops" / "prometheus" / "scrape.yml").read_text())
    namespace = of_kind(rendered, "Namespace")[0]["metadata"]["name"]
    scraped: dict[str, set[tuple[str, int]]] = {}
    for job in config["scrape_configs"]:
        assert job["kubernetes_sd_configs"][0]["namespaces"]["names"] == [namespace]
        for workload in of_kind(rendered, "Deployment"):
            for port in main_container(workload).get("ports", []):
                labels = _relabel(_meta_labels(workload, port, namespace), job["relabel_configs"])
                if labels is not None:
                    assert labels["component"] == component(workload)
                    scraped.setdefault(job["job_name"], set()).add(
                        (labels["component"], port["containerPort"])
                    )
    metrics_ports = {
        (component(d), parse_command(main_container(d)["args"])["metrics_port"])
        for d in of_kind(rendered, "Deployment")
        if parse_command(main_container(d)["args"]).get("metrics_port")
    }
    assert scraped == {"dlc-ledger": metrics_ports, "dlc-ledger-api": {("api", 8000)}}
    assert "authorization" in next(
        j for j in config["scrape_configs"] if j["job_name"] == "dlc-ledger-api"
    )
