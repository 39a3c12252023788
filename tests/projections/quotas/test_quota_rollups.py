"""The hourly rollups: a series read from them equals the one derived from the changes,
whatever order the events arrive in, however the build is chunked, and a late event
makes the rollups rebuild from its hour (never serve a stale point)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from consumers.projector import Projector
from dlc_ledger.services.yaml_files import parse_quota_tree
from ledger.envelopes import Envelope
from ledger.quotas import QuotaTree
from ledger.store.postgres import PostgresEventStore
from projections.quotas.projection import QuotaProjection
from projections.quotas.reads import UsageRow, _recorded, board_walk, series_points, usage_series
from projections.quotas.rollup_builds import extend_rollups
from projections.quotas.rollups import rollup_series, rollup_state
from tests.support.demo_files import DEMO_QUOTAS
from tests.support.quotas import at, occ_ended, occ_started, tree_events

HOUR = 3600
WORKSPACES = ("ws-be", "ws-ls", "ws-burstable")


def _tree() -> QuotaTree:
    return parse_quota_tree(DEMO_QUOTAS.read_text())


def _occupancies(rng: random.Random, count: int, span_hours: int) -> list[Envelope]:
    out = []
    for i in range(count):
        # some on the hour exactly: a change on the hour shows at that very point
        start = rng.randrange(0, span_hours * HOUR) // (HOUR if i % 5 == 0 else 1)
        start = start * HOUR if i % 5 == 0 else start
        end = start + rng.choice([HOUR, rng.randrange(1, 30 * HOUR)])
        ws = rng.choice(WORKSPACES)
        mode = rng.choice(["public", "public", "idle"])
        out.append(
            occ_started(f"p{i}", f"j{i}", ws, at(start), mode=mode, mgpu=1000 * rng.randint(1, 16))
        )
        out.append(occ_ended(f"p{i}", f"j{i}", at(end)))
    return out


def _derived(
    store: PostgresEventStore, points: list[datetime], quota: str | None = None
) -> list[UsageRow]:
    """The series as derived from the changes alone (no rollup)."""
    from projections.quotas.reads import _row

    with store.engine.connect() as conn:
        return [
            _row(key, when, board.rows[key])
            for when, board in board_walk(conn, points, "hour", _recorded(conn, None))
            for key in sorted(board.rows)
            if quota is None or key[0] == quota
        ]


def _series(
    store: PostgresEventStore, quota: str | None = None
) -> tuple[int, list[datetime], list[UsageRow]]:
    with store.engine.connect() as conn:
        points = series_points(conn, "hour", None, None)
        points.append(points[-1] + timedelta(hours=5))  # past the last change
        covered, _ = rollup_series(conn, points)
        return covered, points, usage_series(conn, points, "hour", quota=quota)


def test_series_from_rollups_equal_the_derived_series_whatever_the_arrival_order(
    store: PostgresEventStore,
) -> None:
    rng = random.Random(7)
    events = _occupancies(rng, 60, 48)
    rng.shuffle(events)
    store.append(tree_events(_tree(), at(0)))
    projector = Projector(store, [QuotaProjection()], page_size=13)
    for start in range(0, len(events), 25):  # late events land in hours already rolled up
        store.append(events[start : start + 25])
        projector.catch_up()
        covered, points, series = _series(store)
        assert covered == len(points)  # the maintenance ran to the end
        assert series == _derived(store, points)
    covered, points, series = _series(store, quota="be")
    assert series == _derived(store, points, quota="be") and series


def test_a_late_event_moves_valid_before_back_and_the_points_after_are_derived(
    store: PostgresEventStore,
) -> None:
    store.append(tree_events(_tree(), at(0)))
    store.append([occ_started("p1", "j1", "ws-ls", at(10 * HOUR + 5), mgpu=8000)])
    projector = Projector(store, [QuotaProjection()])
    projector.catch_up()
    with store.engine.connect() as conn:
        assert rollup_state(conn) == (at(11 * HOUR) + timedelta(hours=1), True)
    # applied, not yet maintained: a series must not show the rollup's stale points
    store.append([occ_started("p2", "j2", "ws-be", at(3 * HOUR + 1), mgpu=2000)])
    projector.step(projector.projections[0])
    with store.engine.connect() as conn:
        assert rollup_state(conn) == (at(4 * HOUR), False)
    covered, points, series = _series(store)
    assert covered == 4  # 00:00 to 03:00
    assert series == _derived(store, points)
    projector.catch_up()
    covered, points, series = _series(store)
    assert covered == len(points) and series == _derived(store, points)


def test_a_build_in_small_steps_equals_one_in_a_single_step(store: PostgresEventStore) -> None:
    rng = random.Random(11)
    store.append(tree_events(_tree(), at(0)))
    store.append(_occupancies(rng, 40, 72))
    projector = Projector(store, [QuotaProjection()])
    projector.catch_up()
    covered, points, whole = _series(store)
    assert covered == len(points)
    with store.transaction() as uow:
        uow.connection.exec_driver_sql("DELETE FROM quota_rollup_state")
    steps = 0
    while True:
        with store.transaction() as uow:
            more = extend_rollups(uow.connection, hours=2)
        steps += 1
        if not more:
            break
    assert steps > 10
    covered, points, chunked = _series(store)
    assert covered == len(points) and chunked == whole
