"""The chaos replay's own parts, fast: the seeded plan, the cuttable proxy, the comparison."""

from __future__ import annotations

import json
import random
import socket
import threading
import urllib.request

import pytest

from chaos.compare import compare, compare_deliveries
from chaos.faults import KINDS, plan_faults
from chaos.proxy import TcpProxy
from chaos.webhooks import WebhookReceiver


def test_a_seed_names_one_plan_with_every_kind_before_any_twice() -> None:
    one = plan_faults(random.Random(5), 12, 60.0)
    two = plan_faults(random.Random(5), 12, 60.0)
    assert [(f.at, f.kind, f.target, f.seconds) for f in one] == [
        (f.at, f.kind, f.target, f.seconds) for f in two
    ]
    assert {f.kind for f in sorted(one, key=lambda f: f.index)[: len(KINDS)]} == set(KINDS)
    assert all(0.03 * 60 <= f.at <= 0.9 * 60 for f in one)
    assert [f.at for f in one] == sorted(f.at for f in one)
    other = plan_faults(random.Random(6), 12, 60.0)
    assert [(f.at, f.kind) for f in other] != [(f.at, f.kind) for f in one]


def _echo_server() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=_echo, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


def _echo(conn: socket.socket) -> None:
    with conn:
        while data := conn.recv(1024):
            conn.sendall(data)


def _roundtrip(sock: socket.socket, payload: bytes) -> bytes:
    sock.sendall(payload)
    return sock.recv(1024)


def _refused(port: int) -> bool:
    """Whether a new connection through the proxy fails (reset at connect or first read)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            return not _roundtrip(sock, b"x")
    except OSError:
        return True


def test_the_proxy_forwards_cuts_refuses_and_restores() -> None:
    server, port = _echo_server()
    proxy = TcpProxy(("127.0.0.1", port)).start()
    try:
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        assert _roundtrip(client, b"ping") == b"ping"
        assert proxy.cut() == 2  # both ends of the one connection
        with pytest.raises(OSError):  # reset: a read fails or a write does
            for _ in range(3):
                if not _roundtrip(client, b"again"):
                    raise ConnectionResetError
        client.close()
        assert _refused(proxy.port)
        assert proxy.refused >= 1
        proxy.restore()
        back = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        assert _roundtrip(back, b"pong") == b"pong"
        back.close()
    finally:
        proxy.close()
        server.close()


def test_facts_lost_doubled_and_extra_and_only_volatile_fields_ignored() -> None:
    a = ("JobStarted", "job/1", "2027-01-01T00:00:00Z", "{}")
    b = ("JobSucceeded", "job/1", "2027-01-01T01:00:00Z", "{}")
    c = ("OccupancyEnded", "job/2", "2027-01-01T01:00:00Z", '{"estimated": true}')
    clean_reports = {
        "jobs show 1": {"exit": 0, "stdout": '{"state": "Succeeded", "timeline": '
                        '[{"type": "JobStarted", "position": 7, "late": false}]}'},
        "invoices list": {"exit": 0, "stdout": '[{"total": "1.00", "issued_at": "a", '
                          '"recorded_at": "x"}, {"total": "2.00", "issued_at": "b"}]'},
    }  # fmt: skip
    chaos_reports = {
        "jobs show 1": {"exit": 0, "stdout": '{"state": "Succeeded", "timeline": '
                        '[{"type": "JobStarted", "position": 9, "late": true}]}'},
        "invoices list": {"exit": 0, "stdout": '[{"total": "1.00", "issued_at": "c", '
                          '"recorded_at": "y"}, {"total": "2.01", "issued_at": "b"}]'},
    }  # fmt: skip
    result = compare([a, b], [a, a, c], clean_reports, chaos_reports)
    assert (result.lost, result.doubled, result.extra) == (1, 1, 1)
    assert result.differing == {"invoices list": 2}  # the 2.00 row against the 2.01 row
    assert result.differing_rows == 2
    assert compare([a], [a], clean_reports, clean_reports).differing_rows == 0


def test_deliveries_at_least_once_none_missing_none_extra() -> None:
    one, two, three = ("id1", "JobFailed", "{}"), ("id2", "JobSucceeded", "{}"), ("id3", "x", "")
    seen = compare_deliveries([one, two], [one, two, two])
    assert (seen.delivered, seen.missing, seen.extra, seen.redelivered) == (2, 0, 0, 1)
    seen = compare_deliveries([one, two], [one, three])
    assert (seen.missing, seen.extra) == (1, 1)


def _post(url: str, webhook_id: str, document: object) -> int:
    request = urllib.request.Request(
        url, data=json.dumps(document).encode(), method="POST",
        headers={"webhook-id": webhook_id, "content-type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=5) as response:
        return int(response.status)


def test_the_receiver_counts_each_notification_of_a_storms_summary() -> None:
    receiver = WebhookReceiver().start()
    try:
        assert _post(receiver.url, "n1", {"type": "job.failed", "data": {"job": "a"}}) == 204
        summary = {
            "type": "notifications.summary",
            "data": {"count": 2, "notifications": [
                {"id": "n2", "type": "job.failed", "subject": "s", "data": {"job": "b"}},
                {"id": "n3", "type": "job.succeeded", "subject": "s", "data": {"job": "c"}},
            ]},
        }  # fmt: skip
        assert _post(receiver.url, "summary-id", summary) == 204
        assert receiver.received == [
            ("n1", "job.failed", '{"job": "a"}'),
            ("n2", "job.failed", '{"job": "b"}'),
            ("n3", "job.succeeded", '{"job": "c"}'),
        ]
    finally:
        receiver.stop()
