"""Any interleaving of a service's scale events and its replica pods' events, in any arrival
order, gives one service whose replica-seconds are its pods' occupancy (issue 46, part 1).

The tracker is driven directly (no server): cluster times come from the objects, so the
order the watches deliver them in must change nothing.
"""

from __future__ import annotations

import copy
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from consumers.watchers.event_factory import EventFactory
from consumers.watchers.tracker import DELETED, ClusterTracker
from kubesim.objects import bind_pod, terminate_pod
from kubesim.services import deployment_object, replica_pod

EPOCH = datetime(2026, 11, 1, tzinfo=UTC)
UID = "svc-uid"


def _stamp(seconds: float) -> str:
    return (EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _deployment(replicas: int, rv: int) -> dict[str, Any]:
    obj = deployment_object(
        "ranker", "ns1", replicas=replicas, labels={"dlc.ledger/workspace": "w"}
    )
    obj["metadata"] |= {
        "uid": UID,
        "creationTimestamp": _stamp(0),
        "resourceVersion": str(rv),
        "generation": rv,
    }
    return obj


pod_plans = st.lists(
    st.tuples(
        st.integers(0, 3600),  # bound at
        st.integers(1, 3600),  # for this long
        st.booleans(),  # ends by terminating (else by deletion)
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=150, deadline=None)
@given(plans=pod_plans, scales=st.lists(st.integers(0, 8), max_size=4), data=st.data())
def test_replica_seconds_are_the_pods_occupancy_in_any_order(
    plans: list[tuple[int, int, bool]], scales: list[int], data: st.DataObject
) -> None:
    template = _deployment(len(plans), 1)
    queues: list[list[tuple[str, str, dict[str, Any]]]] = []
    expected = 0
    for i, (start, length, terminates) in enumerate(plans):
        pod = replica_pod(template, i, _stamp(start))
        pod["metadata"] |= {
            "uid": f"pod-{i}",
            "creationTimestamp": _stamp(start),
            "resourceVersion": str(10 + i),
        }
        bound = bind_pod(copy.deepcopy(pod), "n1", _stamp(start))
        end = _stamp(start + length)
        if terminates:
            last = ("pods", "MODIFIED", terminate_pod(copy.deepcopy(bound), end, failed=False))
        else:
            gone = copy.deepcopy(bound)
            gone["metadata"]["deletionTimestamp"] = end
            last = ("pods", DELETED, gone)
        queues.append([("pods", "ADDED", pod), ("pods", "MODIFIED", bound), last])
        expected += length
    queues.append(
        [("workloads", "ADDED", _deployment(len(plans), 1))]
        + [("workloads", "MODIFIED", _deployment(n, 2 + k)) for k, n in enumerate(scales)]
    )
    tracker = ClusterTracker(
        EventFactory("test"),
        lambda: EPOCH + timedelta(days=1),
        watch_nodes=False,
        orphan_grace=5.0,
        monotonic=lambda: 0.0,  # pods wait for their service however late it comes
    )
    events = []
    while any(queues):
        live = [q for q in queues if q]
        queue = live[data.draw(st.integers(0, len(live) - 1), label="next watch")]
        resource, kind, obj = queue.pop(0)
        events += tracker.observe(resource, kind, obj)
    assert tracker.pending_count == 0

    types = [e.type for e in events]
    assert types.count("WorkloadCreated") == 1 and "JobSubmitted" not in types
    started = {e.data["occupancy_id"]: e for e in events if e.type == "OccupancyStarted"}
    ended = {e.data["occupancy_id"]: e for e in events if e.type == "OccupancyEnded"}
    assert {e.data["job_uid"] for e in [*started.values(), *ended.values()]} == {UID}
    assert set(started) == set(ended) and len(started) == len(plans)
    seconds = sum(
        (
            datetime.fromisoformat(ended[o].data["ended_at"])
            - datetime.fromisoformat(started[o].data["started_at"])
        ).total_seconds()
        for o in started
    )
    assert seconds == expected
    # each change of the desired replicas, once, in the order the object went through them
    desired = [len(plans), *scales]
    changes = [(a, b) for a, b in itertools.pairwise(desired) if a != b]
    scaled = [
        (e.data["from_replicas"], e.data["to_replicas"])
        for e in events
        if e.type == "WorkloadScaled"
    ]
    assert scaled == changes
