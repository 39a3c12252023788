"""Facts have bounds, and read models built from facts at their bounds cannot overflow.

Before the bounds, two occupancies of mGPU 2**62 overflowed the quota sums (bigint) and
left every projection stuck at its position, and a 16 KB user exceeded the B-tree row limit.
"""

from __future__ import annotations

import uuid

import pytest

from consumers.projector import Projector
from dlc_ledger.services.yaml_files import parse_quota_tree
from ledger.bounds import (
    MAX_CPU_MILLI,
    MAX_MEMORY_MIB,
    MAX_MGPU,
    MAX_QUOTA,
    MAX_REPLICA_SPECS,
    MAX_REPLICAS,
    USAGE_MONTH_US,
    OutOfBounds,
)
from ledger.catalogue import decode, envelope_from_wire
from ledger.envelopes import Envelope, OutOfBoundsEvent
from ledger.events import JobSubmitted, OccupancyStarted, ReplicaSpec
from ledger.store.postgres import PostgresEventStore
from projections.quotas.reads import usage_at
from projections.registry import all_projections
from tests.support.quotas import at, envelope, occ_started, tree_events

BIGINT = 2**63 - 1
TREE = parse_quota_tree("- {name: a, min: {gpu/any: 1000}, workspaces: [ws-a]}")


def test_the_worst_case_sums_of_facts_at_their_bounds_fit_bigint() -> None:
    """The arithmetic behind docs/wire-format.md (Bounds)."""
    # a rating transaction: one pod's usage over the longest month, units x microseconds
    for per_pod in (MAX_MGPU, MAX_CPU_MILLI, MAX_MEMORY_MIB):
        assert per_pod * USAGE_MONTH_US <= BIGINT
    # quota "used": open maximal occupancies it takes to overflow, against Kubernetes'
    # 150,000 pods per cluster
    assert BIGINT // MAX_MEMORY_MIB > 10**12
    # quota "queued": maximal jobs queued at once it takes to overflow (etcd holds millions
    # of objects at most)
    per_job = MAX_REPLICA_SPECS * MAX_REPLICAS * MAX_MEMORY_MIB
    assert BIGINT // per_job > 10**7
    # quota amounts summed over a tree: maximal quotas it takes to overflow
    assert BIGINT // MAX_QUOTA > 10**4


def test_beyond_its_bounds_a_value_is_not_a_fact_but_stored_ones_stay_readable(
    store: PostgresEventStore,
) -> None:
    with pytest.raises(OutOfBounds, match="mgpu"):
        occ_started("p1", "j1", "ws-a", at(0), mgpu=2**62)
    with pytest.raises(OutOfBounds, match="user: 16000 characters, at most 63"):
        envelope(
            OccupancyStarted(
                occupancy_id="p1", job_uid="j1", pod_uid="p1", workspace="ws-a",
                user="u" * 16_000, mgpu=1, cpu_milli=1, memory_mib=1, started_at=at(0),
            ),
            "job/j1",
            at(0),
        )  # fmt: skip
    wire = occ_started("p1", "j1", "ws-a", at(0)).to_json().replace(b'"mgpu":1000', b'"mgpu":2')
    assert envelope_from_wire(wire).data["mgpu"] == 2
    with pytest.raises(OutOfBoundsEvent):
        envelope_from_wire(wire.replace(b'"mgpu":2', f'"mgpu":{2**62}'.encode()))
    # an event stored before the bounds existed (a 100-character user) is read as it was
    old = OccupancyStarted(
        occupancy_id="p0", job_uid="j0", pod_uid="p0", workspace="ws-a", user="u" * 100,
        mgpu=1, cpu_milli=1, memory_mib=1, started_at=at(0),
    )  # fmt: skip
    store.append(
        [
            Envelope(
                event_id=uuid.uuid4(),
                type=old.type_name,
                schema_version=1,
                stream="job/j0",
                occurred_at=at(0),
                observed_at=at(0),
                source="kube-watcher/old",
                data=old.model_dump(mode="json"),
            )
        ]
    )
    (stored,) = store.read_stream("job/j0")
    assert decode(stored.envelope) == old


def test_every_projection_takes_facts_at_their_bounds(store: PostgresEventStore) -> None:
    """A maximal queued job and maximal occupancies: every projection catches up, and the
    quota sums are exact."""
    pods = 40
    replicas = tuple(
        ReplicaSpec(
            replica_type=f"r{i}", count=MAX_REPLICAS, mgpu=MAX_MGPU,
            cpu_milli=MAX_CPU_MILLI, memory_mib=MAX_MEMORY_MIB,
        )
        for i in range(MAX_REPLICA_SPECS)
    )  # fmt: skip
    queued = JobSubmitted(job_uid="big", name="big", workspace="ws-a", replicas=replicas)
    store.append(
        [
            *tree_events(TREE, at(0)),
            envelope(queued, "job/big", at(1)),
            *(
                occ_started(
                    f"p{i}", f"j{i}", "ws-a", at(2), mgpu=MAX_MGPU, cpu=MAX_CPU_MILLI,
                    memory=MAX_MEMORY_MIB,
                )
                for i in range(pods)
            ),
        ]
    )  # fmt: skip
    Projector(store, all_projections()).catch_up()
    with store.engine.connect() as conn:
        rows = {(r.quota, r.flavor): r for r in usage_at(conn, at(3))}
    gpu = rows[("a", "gpu/any")]
    assert gpu.used == pods * MAX_MGPU  # type: ignore[attr-defined]
    assert gpu.queued == MAX_REPLICA_SPECS * MAX_REPLICAS * MAX_MGPU  # type: ignore[attr-defined]
    memory = next(r for (q, f), r in rows.items() if q == "a" and "mem" in f)
    assert memory.used == pods * MAX_MEMORY_MIB  # type: ignore[attr-defined]
