"""Fault knobs: broken and stalled watches, 429 / 500 answers, compaction, split chunks."""

from __future__ import annotations

import socket

import pytest
import urllib3
from kubernetes import client, watch

from kubesim import PODS, KubeSim
from tests.support.kube import make_job, make_pod


def test_watch_cut_mid_line_then_resume_from_last_rv(sim: KubeSim, v1: client.CoreV1Api) -> None:
    job = make_job(sim, "j1")
    start = v1.list_pod_for_all_namespaces().metadata.resource_version
    make_pod(sim, job, "a")
    w = watch.Watch()
    stream = w.stream(v1.list_pod_for_all_namespaces, resource_version=start)
    assert next(stream)["object"].metadata.name == "a"
    assert sim.cut_watches() == 1
    make_pod(sim, job, "b")
    with pytest.raises(urllib3.exceptions.ProtocolError):
        next(stream)  # half a line, then the connection drops: the half line is never yielded
    assert w.resource_version == sim.store.get(PODS, "ns1", "a")["metadata"]["resourceVersion"]
    resumed = list(
        watch.Watch().stream(
            v1.list_pod_for_all_namespaces, resource_version=w.resource_version, timeout_seconds=1
        )
    )
    assert [e["object"].metadata.name for e in resumed] == ["b"]


def test_stalled_watch_keeps_connection_and_sends_nothing(
    sim: KubeSim, v1: client.CoreV1Api
) -> None:
    job = make_job(sim, "j1")
    make_pod(sim, job, "a")
    stream = watch.Watch().stream(v1.list_pod_for_all_namespaces, _request_timeout=0.3)
    assert next(stream)["object"].metadata.name == "a"
    assert sim.stall_watches() == 1
    make_pod(sim, job, "b")
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        next(stream)
    assert sim.watch_count() == 1  # the server side is still open, just silent
    assert sim.watch_backlog() == 0  # stalled watches do not hold back the trace driver


def test_429_with_retry_after(sim: KubeSim) -> None:
    # With the default urllib3 retry policy the client honours Retry-After and retries.
    v1 = client.CoreV1Api(client.ApiClient(client.Configuration(host=sim.url)))
    sim.fail_next_requests(2, status=429, retry_after=0)
    assert v1.list_pod_for_all_namespaces().items == []
    assert [r.status for r in sim.requests] == [429, 429, 200]
    # Without retries the caller sees the 429 and its Retry-After header.
    config = client.Configuration(host=sim.url)
    config.retries = False
    strict = client.CoreV1Api(client.ApiClient(config))
    sim.fail_next_requests(1, status=429, retry_after=7)
    with pytest.raises(client.ApiException) as info:
        strict.list_pod_for_all_namespaces()
    assert info.value.status == 429 and info.value.headers["Retry-After"] == "7"
    assert strict.list_pod_for_all_namespaces().items == []


def test_500_for_the_next_requests(sim: KubeSim, v1: client.CoreV1Api) -> None:
    sim.fail_next_requests(2, status=500)
    for _ in range(2):
        with pytest.raises(client.ApiException) as info:
            v1.list_node()
        assert info.value.status == 500
    assert v1.list_node().items == []


def test_compaction_expires_watch_and_list_rvs(sim: KubeSim, v1: client.CoreV1Api) -> None:
    job = make_job(sim, "j1")
    make_pod(sim, job, "a")
    old = v1.list_pod_for_all_namespaces().metadata.resource_version
    list(
        watch.Watch().stream(
            v1.list_pod_for_all_namespaces, resource_version=old, timeout_seconds=1
        )
    )
    make_pod(sim, job, "b")
    current = sim.compact()
    for call in (
        lambda: v1.list_pod_for_all_namespaces(resource_version=old),
        lambda: list(
            watch.Watch().stream(
                v1.list_pod_for_all_namespaces, resource_version=old, timeout_seconds=1
            )
        ),
    ):
        with pytest.raises(client.ApiException) as info:
            call()
        assert info.value.status == 410
    # a watch from the compaction point is fine and sees what comes next
    make_pod(sim, job, "c")
    fresh = list(
        watch.Watch().stream(
            v1.list_pod_for_all_namespaces, resource_version=str(current), timeout_seconds=1
        )
    )
    assert [e["object"].metadata.name for e in fresh] == ["c"]


def _raw_chunks(url: str, path: str) -> list[bytes]:
    """Read a watch response with a bare socket and return its chunk payloads."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=2) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        data = b""
        while b"\r\n0\r\n\r\n" not in data:
            more = sock.recv(65536)
            if not more:
                break
            data += more
    body = data.split(b"\r\n\r\n", 1)[1]
    chunks = []
    while body:
        size_line, rest = body.split(b"\r\n", 1)
        size = int(size_line, 16)
        if size == 0:
            break
        chunks.append(rest[:size])
        body = rest[size + 2 :]
    return chunks


def test_event_split_across_chunks_with_multibyte_utf8(sim: KubeSim, v1: client.CoreV1Api) -> None:
    label = "日本語-ü-🚀"
    job = make_job(sim, "j1", labels={"dlc.ledger/user": label})
    make_pod(sim, job, "a")
    sim.split_events(5)
    chunks = _raw_chunks(sim.url, "/api/v1/pods?watch=1&timeoutSeconds=1")
    assert len(chunks) > 10 and max(len(c) for c in chunks) <= 5
    with pytest.raises(UnicodeDecodeError):  # some chunk boundary falls inside a character
        for c in chunks:
            c.decode("utf-8")
    assert label in b"".join(chunks).decode("utf-8")
    events = list(watch.Watch().stream(v1.list_pod_for_all_namespaces, timeout_seconds=1))
    assert events[0]["object"].metadata.labels["dlc.ledger/user"] == label
