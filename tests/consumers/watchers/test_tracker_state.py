"""The tracker's typed state and its one codec: round trips, and the JSON earlier versions
stored (the watcher checkpoints in ``watcher_objects``) still resumes a watcher unchanged."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from consumers.watchers.event_factory import EventFactory
from consumers.watchers.listwatch import JOBS, NODES, PODS
from consumers.watchers.tracker import ClusterTracker
from consumers.watchers.tracker_state import (
    JobStart,
    JobState,
    NodeState,
    PodState,
    ReplicaSlot,
    TrackedState,
    decode_state,
    encode_state,
)
from kubesim.objects import (
    bind_pod,
    job_object,
    mark_job_finished,
    node_object,
    pod_object,
    terminate_pod,
)

_NOW = datetime(2026, 11, 1, 1, tzinfo=UTC)
_T = datetime(2026, 11, 1, 0, 0, 7, 250000, tzinfo=UTC)

# What the tracker stored before its state was typed (main at 5123c3e), captured from a run
# through every kind of key: nodes (cordoned, with and without a GPU model), jobs (finished,
# with an ended and a running replica slot, a bare pod's), pods (ended, running, bare with
# its outcome) and a job start seen on a pod before its job.
OLD_STORED: dict[str, dict[str, Any]] = json.loads("""
{"job/job-uid-1": {"k": "Job", "n": "j1", "ns": "ns1", "o": null,
   "rep": {"worker/0": ["pod-uid-2", null]}, "st": true},
 "job/job-uid-3": {"k": "Job", "n": "j3", "ns": "ns2", "o": "succeeded", "rep": {}, "st": false},
 "job/pod-uid-bare": {"k": "Pod", "n": "bare-0", "ns": "ns2", "o": null,
   "rep": {"worker/0": ["pod-uid-bare", "2026-11-01T00:45:00+00:00"]}, "st": true},
 "jobstart/job-uid-2": {"at": "2026-11-01T00:20:03+00:00", "jk": "Job"},
 "node/n-plain": {"c": true, "f": null, "uid": "node-uid-2"},
 "node/n-v100": {"c": false, "f": "gpu/V100M32", "uid": "node-uid-1"},
 "pod/pod-uid-1": {"bare": false, "e": true, "j": "job-uid-1", "jk": "Job", "n": "j1-0",
   "ns": "ns1", "ph": null, "r": "worker/0", "s": "2026-11-01T00:00:07+00:00"},
 "pod/pod-uid-2": {"bare": false, "e": false, "j": "job-uid-1", "jk": "Job", "n": "j1-0",
   "ns": "ns1", "ph": null, "r": "worker/0", "s": "2026-11-01T00:11:05.250000+00:00"},
 "pod/pod-uid-3": {"bare": false, "e": false, "j": "job-uid-2", "jk": "Job", "n": "j2-0",
   "ns": "ns1", "ph": null, "r": "worker/0", "s": "2026-11-01T00:20:03+00:00"},
 "pod/pod-uid-bare": {"bare": true, "e": true, "j": "pod-uid-bare", "jk": "Pod", "n": "bare-0",
   "ns": "ns2", "ph": "succeeded", "r": "worker/0", "s": "2026-11-01T00:40:01+00:00"}}
""")

_KEYED: list[tuple[str, TrackedState]] = [
    ("node/n1", NodeState("u1", cordoned=True, flavor="gpu/A100")),
    ("node/n2", NodeState("u2", cordoned=False)),
    ("job/j1", JobState("PyTorchJob", "train", "ns", started=True, outcome="failed")),
    (
        "job/j2",
        JobState(
            "Job",
            "j",
            "ns",
            replicas={"worker/0": ReplicaSlot("p1", _T), "worker/1": ReplicaSlot("p2")},
        ),
    ),
    ("job/j5", JobState("Job", "s", "ns", started=True, queue="admitted", resumed_at=_T)),
    ("job/j6", JobState("PyTorchJob", "q", "ns", queue="queued")),
    ("pod/p1", PodState("p-0", "ns", "j1", "PyTorchJob", False, "master/0", _T, True)),
    ("pod/p2", PodState("bare", "ns", "p2", "Pod", True, "", None, False, "succeeded")),
    ("jobstart/j3", JobStart(_T, "Job")),
    ("jobstart/j4", JobStart(datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=2))), "Job")),
]


@pytest.mark.parametrize(("key", "state"), _KEYED, ids=[k for k, _ in _KEYED])
def test_every_record_round_trips_through_stored_json(key: str, state: TrackedState) -> None:
    stored = json.loads(json.dumps(encode_state(state)))  # as JSONB gives it back
    assert decode_state(key, stored) == state
    assert encode_state(decode_state(key, stored)) == stored


def test_the_json_the_old_tracker_stored_decodes_and_stores_back_identically() -> None:
    decoded = {key: decode_state(key, value) for key, value in OLD_STORED.items()}
    assert decoded["pod/pod-uid-2"] == PodState(
        "j1-0", "ns1", "job-uid-1", "Job", False, "worker/0",
        datetime(2026, 11, 1, 0, 11, 5, 250000, tzinfo=UTC), False, None,
    )  # fmt: skip
    assert decoded["job/pod-uid-bare"].replicas == {  # type: ignore[union-attr]
        "worker/0": ReplicaSlot("pod-uid-bare", datetime(2026, 11, 1, 0, 45, tzinfo=UTC))
    }
    assert decoded["node/n-plain"] == NodeState("node-uid-2", cordoned=True, flavor=None)
    assert decoded["jobstart/job-uid-2"] == JobStart(
        datetime(2026, 11, 1, 0, 20, 3, tzinfo=UTC), "Job"
    )
    assert {key: encode_state(state) for key, state in decoded.items()} == OLD_STORED


def _job(name: str, uid: str) -> dict[str, Any]:
    job = job_object(
        name, "ns1", labels={}, annotations={}, cpu_milli=1000, memory_mib=1024, gpus=1, priority=0
    )
    job["metadata"]["uid"] = uid
    return job


def _pod(job: dict[str, Any], uid: str, created: str, node: str, bound: str) -> dict[str, Any]:
    pod = bind_pod(pod_object(f"{job['metadata']['name']}-0", job, created), node, bound)
    pod["metadata"]["uid"] = uid
    return pod


def test_a_tracker_resumed_from_the_old_json_goes_on_as_the_old_tracker_did() -> None:
    # the expected events are what the old tracker published from this state and input
    tracker = ClusterTracker(EventFactory("c1"), lambda: _NOW, orphan_grace=0.0)
    tracker.load(copy.deepcopy(OLD_STORED))
    j1, j2 = _job("j1", "job-uid-1"), _job("j2", "job-uid-2")
    running = _pod(j1, "pod-uid-2", "2026-11-01T00:11:00Z", "n-v100", "2026-11-01T00:11:05.25Z")
    out = tracker.observe(
        PODS.name, "MODIFIED", terminate_pod(running, "2026-11-01T00:50:00Z", failed=False)
    )
    replaced = _pod(j1, "pod-uid-4", "2026-11-01T00:51:00Z", "n-plain", "2026-11-01T00:51:02Z")
    out += tracker.observe(PODS.name, "ADDED", replaced)
    out += tracker.observe(
        JOBS.name, "MODIFIED", mark_job_finished(j1, "2026-11-01T01:00:00Z", failed=False)
    )
    out += tracker.observe(JOBS.name, "ADDED", j2)
    relabelled = node_object("n-plain", gpus=4, cpu_milli=64000, memory_mib=1024, gpu_model="T4")
    relabelled["metadata"]["uid"] = "node-uid-2"
    out += tracker.observe(NODES.name, "MODIFIED", relabelled)
    out += tracker.vanished(["pod/pod-uid-3", "job/job-uid-3", "node/n-v100", "pod/pod-uid-bare"])
    at = {e.type + " " + e.stream: e.occurred_at.isoformat() for e in out}
    assert [(e.type, e.stream) for e in out] == [
        ("OccupancyEnded", "job/job-uid-1"),
        ("JobRestarted", "job/job-uid-1"),
        ("OccupancyStarted", "job/job-uid-1"),
        ("JobSucceeded", "job/job-uid-1"),
        ("JobSubmitted", "job/job-uid-2"),
        ("JobStarted", "job/job-uid-2"),
        ("NodeCordoned", "node/n-plain"),
        ("JobDeleted", "job/job-uid-3"),
        ("NodeRemoved", "node/n-v100"),
        ("OccupancyEnded", "job/job-uid-2"),
        ("JobDeleted", "job/pod-uid-bare"),
    ]
    assert at["JobStarted job/job-uid-2"] == "2026-11-01T00:20:03+00:00"  # the stored job start
    ended = [e.data for e in out if e.type == "OccupancyEnded"]
    assert [(d["occupancy_id"], d["pod_name"], d["ended_at"], d["estimated"]) for d in ended] == [
        ("pod-uid-2", "j1-0", "2026-11-01T00:50:00Z", False),
        ("pod-uid-3", "j2-0", "2026-11-01T01:00:00Z", True),
    ]
    delta = tracker.take_delta().changes
    assert delta["job/job-uid-1"] == {
        "k": "Job", "n": "j1", "ns": "ns1", "o": "succeeded", "st": True,
        "rep": {"worker/0": ["pod-uid-4", None]},
    }  # fmt: skip
    assert delta["node/n-plain"] == {"uid": "node-uid-2", "c": False, "f": "gpu/T4"}
    assert delta["jobstart/job-uid-2"] is None and delta["pod/pod-uid-3"] is None


def test_state_stored_before_node_flavors_decodes() -> None:
    # nodes stored before issue 24 have no "f": no GPU model known, none published
    assert decode_state("node/n1", {"uid": "u1", "c": False}) == NodeState("u1", False, None)


def test_state_stored_by_the_first_watcher_resumes_without_failing() -> None:
    # the first version stored a replica slot as the pod's uid alone and pods without "r";
    # reading the uid's second character as the time the slot ended failed the watcher
    tracker = ClusterTracker(EventFactory("c1"), lambda: _NOW, orphan_grace=0.0)
    tracker.load(
        {
            "job/job-uid-1": {
                "k": "Job",
                "n": "j1",
                "ns": "ns1",
                "st": True,
                "o": None,
                "rep": {"worker/0": "pod-uid-1"},
            },
            "pod/pod-uid-1": {
                "n": "j1-0",
                "ns": "ns1",
                "j": "job-uid-1",
                "jk": "Job",
                "bare": False,
                "s": "2026-11-01T00:00:07+00:00",
                "e": False,
                "ph": None,
            },
        }
    )
    j1 = _job("j1", "job-uid-1")
    new = _pod(j1, "pod-uid-9", "2026-11-01T00:30:00Z", "n1", "2026-11-01T00:30:02Z")
    out = tracker.observe(PODS.name, "ADDED", new)
    assert [e.type for e in out] == ["OccupancyStarted"]
    delta = tracker.take_delta().changes
    assert delta["job/job-uid-1"]["rep"] == {"worker/0": ["pod-uid-9", None]}  # type: ignore[index]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("pod/p1", {"ns": "a"}, "watcher state 'pod/p1' cannot be read: missing 'j'"),
        ("job/j1", {"k": "Job", "n": "j", "ns": "n", "rep": {"w/0": [1, 2, 3]}}, "'job/j1'"),
        ("jobstart/j1", {"at": "yesterday"}, "'jobstart/j1' cannot be read: Invalid isoformat"),
        ("thing/x", {}, "'thing/x' cannot be read: unknown kind 'thing'"),
    ],
)
def test_a_shape_no_version_stored_is_one_clear_error(
    key: str, value: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError) as info:
        decode_state(key, value)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
