"""The watcher's and the dispatcher's Kubernetes roles grant exactly what their code calls.

The calls are found twice, so that neither a new call nor a stale rule slips through:

- statically: every call, anywhere in the product's packages, of a method of the official
  client's API classes (``list_node``, ``patch_namespaced_custom_object``, ...); only the
  two modules below may make any;
- at run time: each module is driven through every path that talks to the cluster (the
  watcher's LIST and WATCH of each resource type it knows, the actuator's resume, suspend,
  stop and pod deletion of every job kind), against a local HTTP server that records each
  request. A request's method and path give the RBAC rule it needs (GET on a collection is
  ``list``, with ``watch=true`` ``watch``, PATCH ``patch``, DELETE on an object ``delete``;
  the path names the API group and resource: a custom object's group and plural are what
  the code put in the URL, from its constants). Every method found statically must have
  been called in the drive, or the drive misses a path.

The rules the requests need must equal, rule for rule, those bound to the component's
ServiceAccount in every overlay, and no other ServiceAccount may be bound to anything.
"""

from __future__ import annotations

import ast
import inspect
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes import client

from consumers.dispatcher.actuator import ActuationError, JobRef
from consumers.dispatcher.kube_actuator import KUBEFLOW_PLURALS, KubeActuator
from consumers.watchers.listwatch import DEFAULT_RESOURCES, ListWatch, WatchSettings
from tests.support.manifests import OVERLAYS, ROOT, Manifest, of_kind, render

Rule = tuple[str, str, str]  # (API group, resource, verb)

#: the module that holds each component's calls to the cluster
MODULES = {
    "watch": ROOT / "consumers" / "watchers" / "listwatch.py",
    "dispatch": ROOT / "consumers" / "dispatcher" / "kube_actuator.py",
}
PRODUCT = ("dlc_ledger", "consumers", "projections", "ledger", "migrations")
#: modules that ask only non-resource URLs every user may (``GET /version``: the built-in
#: ClusterRole ``system:public-info-viewer``), so no role of ours: ``dispatch --clock
#: server`` reads the API server's clock there
PUBLIC_INFO = {ROOT / "consumers" / "dispatcher" / "clocks.py": {"get_code_with_http_info"}}
#: the uid of the job the actuator acts on, and of the pod the fake cluster says it owns
JOB_UID = "0f6f2c3e-2d7c-4b47-9b1e-5c1d2b0a9e11"


def _client_methods() -> set[str]:
    """Every request method of the client's API classes (``close`` sends none)."""
    out: set[str] = set()
    for name, cls in inspect.getmembers(client, inspect.isclass):
        if name.endswith("Api"):
            out.update(m for m, _ in inspect.getmembers(cls, inspect.isfunction))
    return {m for m in out if not m.startswith("_") and m != "close"}


def _called_methods(path: Path, methods: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    return {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in methods
    }


def _watching(target: str) -> bool:
    """``?watch=`` as the API server reads it (Go's ParseBool)."""
    value = parse_qs(urlsplit(target).query).get("watch", ["false"])[0]
    return value in ("1", "t", "T", "true", "TRUE", "True")


def rule_of(method: str, target: str) -> Rule:
    """The RBAC rule one request needs (the API server's own mapping of a request to a
    verb), e.g. ``PATCH /apis/batch/v1/namespaces/a/jobs/j`` → ``("batch", "jobs", "patch")``."""
    parts = urlsplit(target)
    segments = [s for s in parts.path.split("/") if s]
    if segments[:2] == ["api", "v1"]:
        group, rest = "", segments[2:]
    elif segments[0] == "apis":
        group, rest = segments[1], segments[3:]
    else:
        raise AssertionError(f"not a resource request: {method} {target}")
    if rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    resource, name = rest[0], rest[1] if len(rest) > 1 else None
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    verb = {
        ("GET", False): "watch" if _watching(target) else "list",
        ("GET", True): "get",
        ("POST", False): "create",
        ("PUT", True): "update",
        ("PATCH", True): "patch",
        ("DELETE", True): "delete",
        ("DELETE", False): "deletecollection",
    }[(method, name is not None)]
    return group, resource, verb


def test_the_mapping_of_requests_to_rules() -> None:
    assert rule_of("GET", "/api/v1/pods?limit=500") == ("", "pods", "list")
    assert rule_of("GET", "/api/v1/nodes?watch=True") == ("", "nodes", "watch")
    assert rule_of("GET", "/api/v1/namespaces/a/pods/p") == ("", "pods", "get")
    assert rule_of("PATCH", "/apis/batch/v1/namespaces/a/jobs/j") == ("batch", "jobs", "patch")
    assert rule_of("DELETE", "/api/v1/namespaces/a/pods/p") == ("", "pods", "delete")
    assert rule_of("PATCH", "/apis/kubeflow.org/v1/namespaces/a/tfjobs/t") == (
        "kubeflow.org",
        "tfjobs",
        "patch",
    )
    assert rule_of("PATCH", "/api/v1/namespaces/a/pods/p/status") == ("", "pods/status", "patch")


class _Cluster(BaseHTTPRequestHandler):
    """Answers like an API server with nothing in it but one pod owned by JOB_UID, and
    records each request as ``(method, path?query)``."""

    requests: list[tuple[str, str]]

    def _answer(self) -> None:
        self.requests.append((self.command, self.path))
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body: dict[str, Any] = {}
        if self.command == "GET" and _watching(self.path):
            payload = b""  # a watch that ends at once: no events
        else:
            if self.command == "GET":
                pod = {
                    "metadata": {
                        "name": "p-0",
                        "namespace": "team",
                        "uid": JOB_UID,
                        "ownerReferences": [
                            {"apiVersion": "v1", "kind": "Job", "name": "j", "uid": JOB_UID}
                        ],
                    }
                }
                items = [pod] if urlsplit(self.path).path.endswith("/namespaces/team/pods") else []
                body = {"kind": "List", "metadata": {"resourceVersion": "7"}, "items": items}
            elif "/apis/apps/" in self.path:  # a Deployment or StatefulSet: spec is required
                body = {"metadata": {"name": "w"}, "spec": {"selector": {}, "template": {}}}
            payload = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


class _Drive:
    """A recording cluster, an ``ApiClient`` on it, and the client methods called."""

    def __init__(self) -> None:
        handler = type("Handler", (_Cluster,), {"requests": []})
        self.requests: list[tuple[str, str]] = handler.requests
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        host, port = self.server.server_address[:2]
        self.api = client.ApiClient(client.Configuration(host=f"http://{host}:{port}"))
        self.methods: set[str] = set()

    def rules(self) -> set[Rule]:
        return {rule_of(method, target) for method, target in self.requests}


@pytest.fixture
def drive(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Drive]:
    drive = _Drive()
    methods = _client_methods()
    real = client.ApiClient.call_api

    def call_api(self: client.ApiClient, *args: Any, **kwargs: Any) -> Any:
        # the public client method on the stack is the one the product called
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_name in methods and "kubernetes" in frame.f_code.co_filename:
                drive.methods.add(frame.f_code.co_name)
            frame = frame.f_back  # type: ignore[assignment]
        return real(self, *args, **kwargs)

    monkeypatch.setattr(client.ApiClient, "call_api", call_api)
    drive.thread.start()
    yield drive
    drive.server.shutdown()
    drive.server.server_close()
    drive.api.close()


class _Sink:
    def listed(self, *args: object) -> None:
        pass

    def event(self, *args: object) -> None:
        pass

    def bookmark(self, *args: object) -> None:
        pass


def drive_watcher(drive: _Drive) -> None:
    """One LIST and one WATCH of every resource type the watcher knows."""
    for res in DEFAULT_RESOURCES:
        loop = ListWatch(
            drive.api,
            res,
            _Sink(),
            settings=WatchSettings(resync_seconds=None),
            sleep=lambda _s: None,
        )
        loop.step()
        assert loop.stats.lists == 1 and loop.stats.watches == 1, res.name


def drive_actuator(drive: _Drive) -> None:
    """Every action on every kind the actuator knows (a bare pod cannot be resumed)."""
    actuator = KubeActuator(drive.api)
    for kind in ("Job", *KUBEFLOW_PLURALS, "Pod"):
        job = JobRef(uid=JOB_UID, namespace="team", name="j", kind=kind)
        if kind == "Pod":
            with pytest.raises(ActuationError):
                actuator.resume(job)
        else:
            actuator.resume(job)
        actuator.suspend(job)
        actuator.stop(job, 3600)
        actuator.delete_pods(job)
    # services and notebooks: a replica released (its admission gate lifted) or preempted
    # (its pod marked and deleted), a notebook refused (scaled to 0)
    for kind in ("Deployment", "StatefulSet", "LeaderWorkerSet"):
        workload = JobRef(uid=JOB_UID, namespace="team", name="w", kind=kind)
        actuator.release_replicas(workload, 1, shrink=True)
        actuator.refuse(workload, "InsufficientQuota")


DRIVERS = {"watch": drive_watcher, "dispatch": drive_actuator}


def test_only_the_watcher_and_the_actuator_call_the_cluster() -> None:
    methods = _client_methods()
    callers = {
        path.relative_to(ROOT)
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if _called_methods(path, methods)
    }
    expected = {path.relative_to(ROOT) for path in (*MODULES.values(), *PUBLIC_INFO)}
    assert callers == expected
    for path, allowed in PUBLIC_INFO.items():
        assert _called_methods(path, methods) == allowed, path


def _bound_rules(objects: list[Manifest]) -> dict[str, set[Rule]]:
    """ServiceAccount name → every (group, resource, verb) its bindings grant."""
    roles = {
        (r["kind"], r["metadata"]["name"]): r
        for r in of_kind(objects, "ClusterRole") + of_kind(objects, "Role")
    }
    out: dict[str, set[Rule]] = {}
    for binding in of_kind(objects, "ClusterRoleBinding") + of_kind(objects, "RoleBinding"):
        role = roles[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]
        granted = {
            (group, resource, verb)
            for rule in role["rules"]
            for group in rule.get("apiGroups", [])
            for resource in rule.get("resources", [])
            for verb in rule["verbs"]
        }
        for subject in binding["subjects"]:
            assert subject["kind"] == "ServiceAccount", subject
            out.setdefault(subject["name"], set()).update(granted)
    return out


@pytest.mark.parametrize("component", sorted(MODULES))
def test_the_role_covers_exactly_what_the_code_calls(component: str, drive: _Drive) -> None:
    DRIVERS[component](drive)
    static = _called_methods(MODULES[component], _client_methods())
    assert static and static <= drive.methods, f"not driven: {sorted(static - drive.methods)}"
    needed = drive.rules()
    for overlay in OVERLAYS:
        objects = render(overlay)
        bound = _bound_rules(objects)
        deployment = next(
            d
            for d in of_kind(objects, "Deployment")
            if d["metadata"]["labels"]["app.kubernetes.io/component"] == component
        )
        account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
        granted = bound.get(account, set())
        assert granted == needed, (
            overlay.name,
            f"granted, not called: {sorted(granted - needed)}",
            f"called, not granted: {sorted(needed - granted)}",
        )
        # the other components' accounts are bound to nothing
        others = {k for k in bound if k != account and bound[k]}
        assert others <= {
            d["spec"]["template"]["spec"]["serviceAccountName"]
            for d in of_kind(objects, "Deployment")
            if d["metadata"]["labels"]["app.kubernetes.io/component"] in MODULES
        }, others


def test_what_the_code_calls_today(drive: _Drive) -> None:
    """The derived rules, spelt out: a change to them is a change to the roles, reviewed."""
    drive_watcher(drive)
    watched = {"", "batch", "kubeflow.org", "apps", "leaderworkerset.x-k8s.io"}
    assert {g for g, _, _ in drive.rules()} == watched
    assert drive.rules() == {
        (g, r, v)
        for g, r in [
            ("", "nodes"),
            ("", "pods"),
            ("batch", "jobs"),
            *(("kubeflow.org", p) for p in KUBEFLOW_PLURALS.values()),
            ("apps", "deployments"),
            ("apps", "statefulsets"),
            ("leaderworkerset.x-k8s.io", "leaderworkersets"),
        ]
        for v in ("list", "watch")
    }
    drive.requests.clear()
    drive_actuator(drive)
    assert drive.rules() == {
        ("", "pods", "list"),
        ("", "pods", "patch"),
        ("", "pods", "delete"),
        ("batch", "jobs", "patch"),
        *(("kubeflow.org", p, "patch") for p in KUBEFLOW_PLURALS.values()),
        ("apps", "deployments", "patch"),
        ("apps", "statefulsets", "patch"),
        ("leaderworkerset.x-k8s.io", "leaderworkersets", "patch"),
    }
