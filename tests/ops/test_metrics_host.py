"""``--metrics-port`` listens on loopback unless ``DLC_METRICS_HOST`` says otherwise: in a
Kubernetes pod the manifests set it to 0.0.0.0, or neither Prometheus nor the kubelet's
probes could reach ``/metrics`` (ops/kubernetes/base/settings.env)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.manifests import ROOT

_SERVE = (
    "import sys, time\n"
    "from consumers.metrics import serve_metrics\n"
    "assert serve_metrics(int(sys.argv[1]))\n"
    "print('serving', flush=True)\n"
    "time.sleep(60)\n"
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening_on(port: int) -> set[str]:
    """The IPv4 addresses a socket listens on at ``port`` (from /proc/net/tcp)."""
    out = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:
            out.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return out


@pytest.mark.parametrize(("host", "expected"), [(None, "127.0.0.1"), ("0.0.0.0", "0.0.0.0")])
def test_the_metrics_port_listens_where_it_is_told(host: str | None, expected: str) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "DLC_METRICS_HOST"}
    if host is not None:
        env["DLC_METRICS_HOST"] = host
    process = subprocess.Popen(
        [sys.executable, "-c", _SERVE, str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "serving"
        deadline = time.monotonic() + 10
        while not _listening_on(port) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _listening_on(port) == {expected}
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            assert b"dlc_ingest_events_total" in answer.read()
    finally:
        process.kill()
        process.wait(timeout=10)


def test_the_manifests_set_it() -> None:
    settings = (ROOT / "ops" / "kubernetes" / "base" / "settings.env").read_text()
    assert "DLC_METRICS_HOST=0.0.0.0" in settings.splitlines()
