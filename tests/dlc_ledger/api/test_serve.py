"""``dlc-ledger api serve``: the real process under uvicorn on a free port answers with a
token made by ``tokens create`` and logs the principal; Ctrl-C (SIGINT) stops it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx

from tests.support.clis import cli_process


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_answers_over_http_and_logs_the_principal(database_url: str) -> None:
    made = cli_process(database_url, "tokens", "create", "--role", "auditor", "--name", "aud")
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip()
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "dlc_ledger", "api", "serve", "--port", str(port)],
        env={**os.environ, "DATABASE_URL": database_url},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/v1/whoami"
        deadline = time.monotonic() + 60
        while True:
            try:
                response = httpx.get(url, headers={"Authorization": f"Bearer {secret}"})
                break
            except httpx.TransportError:
                assert server.poll() is None, "api serve exited"
                assert time.monotonic() < deadline, "api serve did not start"
                time.sleep(0.2)
        assert response.status_code == 200 and response.json()["name"] == "aud"
        assert httpx.get(url).status_code == 401
    finally:
        server.send_signal(signal.SIGINT)
        _, log = server.communicate(timeout=30)
    assert server.returncode == 0, log
    assert "aud(tok_" in log and "GET /v1/whoami 200" in log
    assert "- GET /v1/whoami 401" in log


def test_workers_share_one_metrics_view(database_url: str) -> None:
    """``--workers 2``: whichever worker answers ``/metrics`` counts every worker's requests
    (prometheus-client's multiprocess mode), and the workers' access lines all reach the log."""
    made = cli_process(database_url, "tokens", "create", "--role", "admin", "--name", "adm")
    assert made.returncode == 0, made.stderr
    headers = {"Authorization": f"Bearer {made.stdout.strip()}"}
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "dlc_ledger", "api", "serve", "--port", str(port), "--workers", "2"],
        env={**os.environ, "DATABASE_URL": database_url},
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/v1/whoami", headers=headers)
                break
            except httpx.TransportError:
                assert server.poll() is None, "api serve exited"
                assert time.monotonic() < deadline, "api serve did not start"
                time.sleep(0.2)
        for _ in range(30):  # a new connection each: the kernel spreads them over workers
            assert httpx.get(f"{base}/v1/whoami", headers=headers).status_code == 200
        counts = set()
        for _ in range(6):
            text = httpx.get(f"{base}/metrics", headers=headers).text
            counts.add(_whoami_count(text))
    finally:
        server.send_signal(signal.SIGINT)
        _, log = server.communicate(timeout=30)
    assert counts == {31.0}, counts  # the first request and the 30: every scrape agrees
    assert log.count("GET /v1/whoami 200") == 31, log


def _whoami_count(text: str) -> float:
    total = 0.0
    for line in text.splitlines():
        named = 'route="/v1/whoami"' in line and 'status="2xx"' in line
        if line.startswith("dlc_api_requests_total{") and named:
            total += float(line.rsplit(" ", 1)[1])
    return total
