"""The list / watch / patch / delete protocol, through the official `kubernetes` client."""

from __future__ import annotations

import pytest
from kubernetes import client, watch

from kubesim import PODS, KubeSim
from tests.support.kube import make_job, make_pod


def test_discovery_and_version(api: client.ApiClient) -> None:
    assert client.VersionApi(api).get_code().git_version.startswith("v1.")
    assert client.CoreApi(api).get_api_versions().versions == ["v1"]
    groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    assert groups == {"batch", "kubeflow.org", "apps", "leaderworkerset.x-k8s.io"}


def test_paginated_list_is_one_consistent_snapshot(sim: KubeSim, v1: client.CoreV1Api) -> None:
    job = make_job(sim, "j1")
    for i in range(7):
        make_pod(sim, job, f"p{i}")
    first = v1.list_pod_for_all_namespaces(limit=3)
    assert [p.metadata.name for p in first.items] == ["p0", "p1", "p2"]
    assert first.metadata.remaining_item_count == 4
    make_pod(sim, job, "p7")  # created after the first page: not in this list
    names = [p.metadata.name for p in first.items]
    token = first.metadata._continue
    while token:
        page = v1.list_pod_for_all_namespaces(limit=3, _continue=token)
        assert page.metadata.resource_version == first.metadata.resource_version
        names += [p.metadata.name for p in page.items]
        token = page.metadata._continue
    assert names == [f"p{i}" for i in range(7)]
    assert len(v1.list_pod_for_all_namespaces().items) == 8


def test_every_object_carries_uid_rv_and_timestamp(sim: KubeSim, v1: client.CoreV1Api) -> None:
    job = make_job(sim, "j1")
    make_pod(sim, job, "p0")
    pod = v1.read_namespaced_pod("p0", "ns1")
    assert (
        pod.metadata.uid
        and pod.metadata.creation_timestamp.isoformat() == "2026-11-01T00:00:00+00:00"
    )
    assert int(pod.metadata.resource_version) == int(job["metadata"]["resourceVersion"]) + 1
    assert pod.metadata.owner_references[0].uid == job["metadata"]["uid"]


def test_label_and_field_selectors(sim: KubeSim, v1: client.CoreV1Api) -> None:
    a = make_job(sim, "ja", labels={"team": "a", "tier": "gold"})
    b = make_job(sim, "jb", labels={"team": "b"})
    make_pod(sim, a, "pa", node="n1")
    make_pod(sim, b, "pb", node="n2")
    make_pod(sim, b, "pc")

    def names(**kw: str) -> list[str]:
        return [p.metadata.name for p in v1.list_pod_for_all_namespaces(**kw).items]

    assert names(label_selector="team=a") == ["pa"]
    assert names(label_selector="team!=a") == ["pb", "pc"]
    assert names(label_selector="tier") == ["pa"]
    assert names(label_selector="!tier") == ["pb", "pc"]
    assert names(label_selector="team in (a, b),!tier") == ["pb", "pc"]
    assert names(field_selector="spec.nodeName=n2") == ["pb"]
    assert names(field_selector="metadata.name=pc") == ["pc"]
    assert names(field_selector="spec.nodeName=") == ["pc"]


def test_watch_from_list_rv_with_bookmarks(sim: KubeSim, v1: client.CoreV1Api) -> None:
    job = make_job(sim, "j1")
    make_pod(sim, job, "old")
    listed = v1.list_namespaced_pod("ns1")
    make_pod(sim, job, "new1")
    make_pod(sim, job, "new2")
    w = watch.Watch()
    seen: list[tuple[str, str]] = []
    for event in w.stream(
        v1.list_namespaced_pod,
        "ns1",
        resource_version=listed.metadata.resource_version,
        allow_watch_bookmarks=True,
        timeout_seconds=30,
    ):
        if event["type"] == "BOOKMARK":
            seen.append(("BOOKMARK", event["raw_object"]["metadata"]["resourceVersion"]))
            w.stop()
        else:
            seen.append((event["type"], event["object"].metadata.name))
    assert seen == [
        ("ADDED", "new1"),
        ("ADDED", "new2"),
        ("BOOKMARK", str(sim.store.resource_version)),
    ]
    assert w.resource_version == str(sim.store.resource_version)


def test_watch_without_rv_starts_with_current_state_and_times_out(
    sim: KubeSim, v1: client.CoreV1Api
) -> None:
    job = make_job(sim, "j1")
    make_pod(sim, job, "p0")
    # timeoutSeconds=1 is scaled to 0.1 s by the fixture; the stream then ends cleanly.
    events = list(watch.Watch().stream(v1.list_pod_for_all_namespaces, timeout_seconds=1))
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "p0")]


def test_selector_change_is_seen_as_added_and_deleted(sim: KubeSim, v1: client.CoreV1Api) -> None:
    job = make_job(sim, "j1")
    make_pod(sim, job, "p0")
    rv = v1.list_pod_for_all_namespaces().metadata.resource_version
    sim.cluster.update(
        PODS,
        "ns1",
        "p0",
        lambda p: p["metadata"]["labels"].update({"x": "1"}),
    )
    sim.cluster.update(PODS, "ns1", "p0", lambda p: p["metadata"]["labels"].pop("x"))
    events = list(
        watch.Watch().stream(
            v1.list_pod_for_all_namespaces,
            label_selector="x=1",
            resource_version=rv,
            timeout_seconds=1,
        )
    )
    assert [e["type"] for e in events] == ["ADDED", "DELETED"]


def test_watch_410_as_error_event(sim: KubeSim, v1: client.CoreV1Api) -> None:
    job = make_job(sim, "j1")
    make_pod(sim, job, "p0")
    old = v1.list_pod_for_all_namespaces().metadata.resource_version
    make_pod(sim, job, "p1")
    now = sim.compact()
    with pytest.raises(client.ApiException) as info:
        list(
            watch.Watch().stream(
                v1.list_pod_for_all_namespaces, resource_version=old, timeout_seconds=5
            )
        )
    assert info.value.status == 410
    assert f"too old resource version: {old} ({now})" in str(info.value.reason)
    assert sim.requests[-1].status == 200  # delivered inside a 200 stream
    # Without timeout_seconds the client retries once from the same RV, then gives up.
    with pytest.raises(client.ApiException) as info:
        list(watch.Watch().stream(v1.list_pod_for_all_namespaces, resource_version=old))
    assert info.value.status == 410


def test_watch_410_as_http_status(sim: KubeSim, v1: client.CoreV1Api) -> None:
    sim.expired_watch_as_status = True
    job = make_job(sim, "j1")
    make_pod(sim, job, "p0")
    sim.compact()
    with pytest.raises(client.ApiException) as info:
        list(
            watch.Watch().stream(
                v1.list_pod_for_all_namespaces, resource_version="1", timeout_seconds=5
            )
        )
    assert info.value.status == 410
    assert sim.requests[-1].status == 410


def test_history_window_expires_old_revisions(v1: client.CoreV1Api) -> None:
    with KubeSim(history_size=5, timeout_scale=0.1) as small:
        api = client.CoreV1Api(client.ApiClient(client.Configuration(host=small.url)))
        job = make_job(small, "j1")
        for i in range(9):
            make_pod(small, job, f"p{i}")
        latest = small.store.resource_version
        with pytest.raises(client.ApiException) as info:
            api.list_pod_for_all_namespaces(resource_version="2")
        assert info.value.status == 410
        with pytest.raises(client.ApiException):
            list(
                watch.Watch().stream(
                    api.list_pod_for_all_namespaces, resource_version="2", timeout_seconds=1
                )
            )
        recent = list(
            watch.Watch().stream(
                api.list_pod_for_all_namespaces, resource_version=str(latest - 3), timeout_seconds=1
            )
        )
        assert [e["object"].metadata.name for e in recent] == ["p6", "p7", "p8"]


def test_continue_token_expires_after_compaction(sim: KubeSim, v1: client.CoreV1Api) -> None:
    job = make_job(sim, "j1")
    for i in range(4):
        make_pod(sim, job, f"p{i}")
    first = v1.list_pod_for_all_namespaces(limit=2)
    make_pod(sim, job, "p9")
    sim.compact()
    with pytest.raises(client.ApiException) as info:
        v1.list_pod_for_all_namespaces(limit=2, _continue=first.metadata._continue)
    assert info.value.status == 410
