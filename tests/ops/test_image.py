"""``ops/Dockerfile`` builds the image the manifests run (no container runtime here to build
it: tests/packaging/test_wheel.py runs its steps): what the manifests assume of it holds —
the user the pods run as, the console script as the entrypoint, and a build context
without the checkout's environments."""

from __future__ import annotations

import re

from tests.support.manifests import OVERLAYS, ROOT, main_container, of_kind, render

DOCKERFILE = (ROOT / "ops" / "Dockerfile").read_text()


def _instructions(name: str) -> list[str]:
    return re.findall(rf"^{name} (.+)$", DOCKERFILE, flags=re.MULTILINE)


def test_the_image_runs_the_console_script_as_the_pods_user() -> None:
    assert _instructions("ENTRYPOINT") == ['["dlc-ledger"]']
    (user,) = _instructions("USER")
    uid, gid = (int(part) for part in user.split(":"))
    for overlay in OVERLAYS:
        for workload in of_kind(render(overlay), "Deployment") + of_kind(render(overlay), "Job"):
            pod = workload["spec"]["template"]["spec"]
            assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (
                uid,
                gid,
            ), workload["metadata"]["name"]
            # a read-only root: HOME must be somewhere writable, the pods' /tmp
            assert main_container(workload)["securityContext"]["readOnlyRootFilesystem"]
            mounts = {m["mountPath"] for m in main_container(workload)["volumeMounts"]}
            assert "/tmp" in mounts
    assert "HOME=/tmp" in DOCKERFILE
    # installed from the wheel built from this checkout, on the Python the project needs
    assert all(f.startswith("python:3.11") for f in (i.split()[0] for i in _instructions("FROM")))


def test_the_build_context_leaves_the_environments_out() -> None:
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".git", ".venv", "test-artifacts"} <= ignored
