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

from tests.clis import cli_process


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
