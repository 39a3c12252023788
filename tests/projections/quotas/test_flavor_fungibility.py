"""Flavor fungibility: usage of ``gpu/<model>`` counts against the quota's own
``gpu/<model>`` entry where the leaf names one, else against its ``gpu/any``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from consumers.projector import Projector
from dlc_ledger.services.yaml_files import parse_quota_tree
from ledger.events import QuotaSpec
from ledger.quotas import NO_QUOTA, counted_flavor, counting_flavors
from ledger.store.postgres import PostgresEventStore
from ledger.usage_boards import UsageBoard
from projections.quotas.projection import QuotaProjection
from projections.quotas.reads import series_points, usage_at, usage_history, usage_series
from tests.support.quotas import (
    at,
    check_invariants,
    occ_ended,
    occ_started,
    states,
    submitted,
    tree_events,
)

# the demo's shape: only gpu/any
ANY_ONLY = parse_quota_tree(
    """
- {name: root, min: {gpu/any: 4000, cpu: 16000}}
- {name: a, parent: root, min: {gpu/any: 2000, cpu: 8000}, workspaces: [ws-a]}
- {name: b, parent: root, min: {gpu/any: 1000, cpu: 4000}, workspaces: [ws-b]}
"""
)
# a names gpu/A100 (its guarantee of that model); b does not
A_NAMES_A100 = parse_quota_tree(
    """
- {name: root, min: {gpu/any: 4000, gpu/A100: 2000, cpu: 16000}}
- {name: a, parent: root, min: {gpu/any: 2000, gpu/A100: 1000, cpu: 8000}, workspaces: [ws-a]}
- {name: b, parent: root, min: {gpu/any: 1000, cpu: 4000}, workspaces: [ws-b]}
"""
)


def _spec(**fields: object) -> QuotaSpec:
    return QuotaSpec.model_validate({"quota_id": "q", "parent": "p", **fields})


@pytest.mark.parametrize(
    ("spec", "flavor", "counted"),
    [
        (_spec(min={"gpu/A100": 1000}), "gpu/A100", "gpu/A100"),
        (_spec(max={"gpu/A100": 1000}), "gpu/A100", "gpu/A100"),  # may only borrow it
        (_spec(min={"gpu/A100": 0}, lend_limit={"gpu/A100": 0}), "gpu/A100", "gpu/A100"),
        (_spec(min={"gpu/any": 1000, "gpu/T4": 500}), "gpu/A100", "gpu/any"),
        (_spec(min={"gpu/any": 1000}), "gpu/A100", "gpu/any"),
        (_spec(), "gpu/A100", "gpu/any"),
        (None, "gpu/A100", "gpu/any"),  # no quota: under "-"
        (_spec(min={"gpu/A100": 1000}), "gpu/any", "gpu/any"),  # any never becomes a model
        (_spec(min={"gpu/A100": 1000}), "cpu", "cpu"),
        (None, "memory", "memory"),
    ],
)
def test_a_model_counts_as_itself_only_where_the_quota_names_it(
    spec: QuotaSpec | None, flavor: str, counted: str
) -> None:
    assert counted_flavor(spec, flavor) == counted


def test_reading_gpu_any_reads_every_recorded_model() -> None:
    stored = ["cpu", "gpu/A100", "gpu/T4", "gpu/any", "memory"]
    assert counting_flavors("gpu/any", stored) == ["gpu/A100", "gpu/T4", "gpu/any"]
    assert counting_flavors("gpu/A100", stored) == ["gpu/A100"]
    assert counting_flavors("cpu", stored) == ["cpu"]
    assert counting_flavors("gpu/V100", stored) == ["gpu/V100"]


def _used(board: UsageBoard) -> dict[tuple[str, str], int]:
    return {key: numbers[2] for key, numbers in board.rows.items()}


def test_board_counts_an_unnamed_model_against_gpu_any_and_recounts_on_a_tree_change() -> None:
    board = UsageBoard(ANY_ONLY.specs)
    board.add("a", "gpu/A100", [800, 0, 0, 1, 0])
    board.add("b", "gpu/A100", [1500, 0, 0, 1, 0])
    board.add("b", "gpu/any", [300, 0, 0, 1, 0])
    board.add("gone", "gpu/T4", [200, 0, 0, 1, 0])  # a quota the tree does not hold
    board.settle()
    assert {k: v for k, v in _used(board).items() if k[1] != "cpu"} == {
        ("root", "gpu/any"): 2600,
        ("a", "gpu/any"): 800,
        ("b", "gpu/any"): 1800,
        (NO_QUOTA, "gpu/any"): 200,
    }
    b = board.rows[("b", "gpu/any")]
    assert (b[3], b[6]) == (800, 2)  # borrowed above its min of 1000; both jobs run
    assert board.rows[("root", "gpu/any")][4] == 800  # from its shared pool
    check_invariants(ANY_ONLY.specs, _named(board))

    assert board.settle() == {}
    board.set_tree(A_NAMES_A100.specs)  # a now counts its A100 usage as gpu/A100
    changed = board.settle()
    assert {k: v for k, v in _used(board).items() if k[1] != "cpu"} == {
        ("root", "gpu/any"): 1800,
        ("a", "gpu/any"): 0,
        ("b", "gpu/any"): 1800,
        ("root", "gpu/A100"): 800,
        ("a", "gpu/A100"): 800,
        ("b", "gpu/A100"): 0,
        (NO_QUOTA, "gpu/any"): 200,
    }
    assert changed[("a", "gpu/any")] is not None and ("a", "gpu/A100") in changed
    check_invariants(A_NAMES_A100.specs, _named(board))

    # a's next A100 change lands under gpu/A100, b's under gpu/any, incrementally
    board.add("a", "gpu/A100", [-800, 0, 0, -1, 0])
    board.add("b", "gpu/A100", [-1500, 0, 0, -1, 0])
    changed = board.settle()
    assert changed[("a", "gpu/A100")] is not None and changed[("a", "gpu/A100")][2] == 0
    assert board.rows[("b", "gpu/any")][2] == 300 and board.rows[("b", "gpu/any")][6] == 1
    fresh = UsageBoard(board.specs)
    for flavor, per in board.own.items():
        for quota, raw in per.items():
            fresh.add(quota, flavor, raw)
    fresh.settle()
    assert fresh.rows == board.rows


def _named(board: UsageBoard) -> dict[tuple[str, str], object]:
    from types import SimpleNamespace

    names = ("min", "max", "used", "borrowed", "lent", "queued", "running", "qjobs", "over")
    return {
        key: SimpleNamespace(**dict(zip(names, numbers, strict=True)), over_admitted=numbers[8])
        for key, numbers in board.rows.items()
    }


def test_projection_counts_replayed_models_against_the_tree_in_force(
    store: PostgresEventStore,
) -> None:
    """A replay's occupancies carry their node's model; the demo tree names only gpu/any:
    their usage and the jobs' counts go to gpu/any (regression: borrowed and over-admitted
    gpu/<model> rows the tree does not define). A tree naming gpu/A100 for a, applied at
    60, counts a's A100 usage as gpu/A100 from then on, in every read."""
    store.append(
        [
            *tree_events(ANY_ONLY, at(0)),
            submitted("j1", "ws-a", at(10), mgpu=1000, cpu=0, memory=0),
            occ_started("p1", "j1", "ws-a", at(20), mgpu=1000, cpu=0, memory=0, flavor="gpu/A100"),
            submitted("j2", "ws-b", at(10), mgpu=1500, cpu=0, memory=0, flavor="gpu/T4"),
            occ_started("p2", "j2", "ws-b", at(30), mgpu=1500, cpu=0, memory=0, flavor="gpu/T4"),
            submitted("j3", "ws-b", at(40), mgpu=500, cpu=0, memory=0, flavor="gpu/T4"),
        ]
    )
    store.append(tree_events(A_NAMES_A100, at(60), current=ANY_ONLY))
    store.append(
        [
            occ_ended("p1", "j1", at(100)),
            occ_ended("p2", "j2", at(100)),
        ]
    )
    Projector(store, [QuotaProjection()], page_size=3).catch_up()

    with store.engine.connect() as conn:
        # the change rows keep the recorded flavors
        keys = conn.execute(
            text("SELECT DISTINCT jsonb_object_keys(changes) FROM quota_changes")
        ).scalars()
        assert set(keys) == {"gpu/A100", "gpu/T4", "gpu/any"}

        def rows(second: float) -> dict[tuple[str, str], tuple[int, ...]]:
            return {
                (r.quota, r.flavor): (r.used, r.borrowed, r.queued, r.running_jobs, r.queued_jobs)
                for r in usage_at(conn, at(second))
                if r.flavor != "cpu" and r.flavor != "memory"
            }

        # j1 queued (gpu/any request), j2 queued (gpu/T4 request, b names no T4)
        assert rows(15) == {
            ("root", "gpu/any"): (0, 0, 2500, 0, 2),
            ("a", "gpu/any"): (0, 0, 1000, 0, 1),
            ("b", "gpu/any"): (0, 0, 1500, 0, 1),
        }
        assert rows(45) == {
            ("root", "gpu/any"): (2500, 0, 500, 2, 1),
            ("a", "gpu/any"): (1000, 0, 0, 1, 0),
            ("b", "gpu/any"): (1500, 500, 500, 1, 1),
        }
        # a names gpu/A100 from 60: its A100 occupancy counts there; j1 requested gpu/any,
        # so it runs in the gpu/any row (job counts follow the request's flavor)
        assert rows(70) == {
            ("root", "gpu/any"): (1500, 0, 500, 2, 1),
            ("a", "gpu/any"): (0, 0, 0, 1, 0),
            ("b", "gpu/any"): (1500, 500, 500, 1, 1),
            ("root", "gpu/A100"): (1000, 0, 0, 0, 0),
            ("a", "gpu/A100"): (1000, 0, 0, 0, 0),
            ("b", "gpu/A100"): (0, 0, 0, 0, 0),
        }
        full = usage_history(conn)
        assert not {r.flavor for r in full} & {"gpu/T4"}
        for when, state in states(full):
            specs = ANY_ONLY.specs if when < at(60) else A_NAMES_A100.specs
            check_invariants(specs, state)
        # narrowed to gpu/any, a window and a series read the models' changes too
        since, until = at(25), at(100)
        window = usage_history(conn, since=since, until=until)
        narrowed = usage_history(conn, since=since, until=until, flavor="gpu/any")
        assert narrowed == [r for r in window if r.flavor == "gpu/any"]
        assert [r.used for r in narrowed if r.quota == "b" and r.at == since] == [0]
        assert [r.used for r in narrowed if r.quota == "b" and r.at == at(30)] == [1500]
        a100 = usage_history(conn, since=since, until=until, flavor="gpu/A100")
        assert a100 == [r for r in window if r.flavor == "gpu/A100"] and a100
        points = series_points(conn, "hour", at(0), at(0) + timedelta(hours=2))
        series = usage_series(conn, points, "hour", flavor="gpu/any")
        assert series == [r for r in usage_series(conn, points, "hour") if r.flavor == "gpu/any"]
