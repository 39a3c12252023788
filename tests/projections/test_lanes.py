"""Projector lanes: projections split over processes build what one runner builds."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Connection

from consumers.lanes import LaneFailed, catch_up_lanes, plan_lanes
from consumers.projector import Projector
from dlc_ledger.wiring.context import store_opener
from ledger.events import (
    JobStarted,
    JobSubmitted,
    JobSucceeded,
    NodeRegistered,
    OccupancyEnded,
    OccupancyStarted,
)
from ledger.store.base import UnitOfWork
from ledger.store.postgres import PostgresEventStore
from projections.base import Projection
from projections.registry import all_projections
from tests.support.builders import Narrator, at, replica
from tests.support.tables import snapshot


class Weighted(Projection):
    def __init__(self, name: str, cost: float) -> None:
        self.name, self.cost = name, cost

    def apply(self, uow: UnitOfWork, conn: Connection, events: Any) -> None:
        raise NotImplementedError


def test_lanes_are_disjoint_cover_everything_and_balance_cost() -> None:
    costs = {"a": 4.0, "b": 3.0, "c": 1.5, "d": 1.0, "e": 0.2}
    projections = [Weighted(name, cost) for name, cost in costs.items()]
    lanes = plan_lanes(projections, 2)
    names = [[p.name for p in lane] for lane in lanes]
    assert sorted(n for lane in names for n in lane) == sorted(costs)
    assert names == [["a", "d"], ["b", "c", "e"]]  # 5.0 against 4.7
    assert [[p.name for p in lane] for lane in plan_lanes(projections, 9)] == [[n] for n in costs]
    assert plan_lanes(projections, 1) == [sorted(projections, key=lambda p: -p.cost)]
    with pytest.raises(ValueError, match="at least 1"):
        plan_lanes(projections, 0)


def _cluster() -> Narrator:
    n = Narrator("lanes")
    for i in range(3):
        n.tell(
            NodeRegistered(node=f"n{i}", pool="p", gpus=8, cpu_milli=9000, memory_mib=9000),
            f"node/n{i}",
            at(0),
        )
    for i in range(12):
        uid, stream = f"u{i}", f"job/u{i}"
        n.tell(
            JobSubmitted(job_uid=uid, name=f"j{i}", workspace=f"ws{i % 3}", replicas=(replica(),)),
            stream,
            at(i),
        )
        n.tell(JobStarted(job_uid=uid), stream, at(i + 1))
        n.tell(
            OccupancyStarted(
                occupancy_id=f"{uid}-0",
                job_uid=uid,
                pod_uid=f"{uid}-0",
                node=f"n{i % 3}",
                mgpu=1000,
                cpu_milli=4000,
                memory_mib=8192,
                workspace=f"ws{i % 3}",
                started_at=at(i + 1),
            ),
            stream,
            at(i + 1),
        )
        if i % 4:
            n.tell(
                OccupancyEnded(
                    occupancy_id=f"{uid}-0", job_uid=uid, pod_uid=f"{uid}-0", ended_at=at(i + 30)
                ),
                stream,
                at(i + 30),
            )
            n.tell(JobSucceeded(job_uid=uid), stream, at(i + 30))
    return n


def test_lanes_build_what_one_runner_builds(store: PostgresEventStore, database_url: str) -> None:
    events = _cluster().events
    store.append(events)
    covered = catch_up_lanes(store_opener(database_url), all_projections(), workers=2, page_size=7)
    assert covered == len(events) * 2  # two lanes, each from 0 to the head
    projector = Projector(store, all_projections())
    assert all(s.lag == 0 for s in projector.status())
    in_lanes = snapshot(store, all_projections())
    assert in_lanes["job_state"] and in_lanes["quota_changes"] and in_lanes["inventory_nodes"]

    for projection in projector.projections:
        projector.rebuild(projection)
    assert snapshot(store, all_projections()) == in_lanes


def test_a_failing_lane_is_reported_with_its_projections_and_cause(
    store: PostgresEventStore, database_url: str
) -> None:
    store.append(_cluster().events)
    unreachable = database_url.rsplit("/", 1)[0] + "/no_such_database"
    with pytest.raises(LaneFailed, match=r"lane (quotas|jobs).*no_such_database"):
        catch_up_lanes(store_opener(unreachable), all_projections(), workers=2, page_size=50)
    with pytest.raises(LaneFailed, match="no projection named 'nope'"):
        catch_up_lanes(store_opener(database_url), [Weighted("nope", 1.0)], workers=2, page_size=50)
