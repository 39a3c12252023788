"""Quota usage split by kind (issue 46): training, services and notebooks share one tree,
and at every node and instant their parts add up to the node's ``used``."""

from __future__ import annotations

import json

from consumers.projector import Projector
from dlc_ledger.services.yaml_files import parse_quota_tree
from ledger.events import WorkloadCreated
from ledger.store.postgres import PostgresEventStore
from projections.quotas.kinds import used_by_kind
from projections.quotas.projection import QuotaProjection
from projections.quotas.reads import usage_at
from tests.support.builders import replica
from tests.support.clis import CliCall
from tests.support.quotas import at, envelope, occ_ended, occ_started, tree_events

TREE = parse_quota_tree(
    """
- {name: pool, min: {gpu/any: 16000, cpu: 64000}}
- {name: infer, parent: pool, min: {gpu/any: 8000, cpu: 32000}, workspaces: [ws-eas]}
- {name: train, parent: pool, min: {gpu/any: 8000, cpu: 32000}, workspaces: [ws-dlc]}
"""
)


def _workload(uid: str, kind: str, workspace: str) -> object:
    return envelope(
        WorkloadCreated.model_validate(
            {"job_uid": uid, "name": uid, "workload": kind, "workspace": workspace,
             "replica": replica().model_dump()}
        ),
        f"job/{uid}",
        at(0),
    )  # fmt: skip


def _world(store: PostgresEventStore) -> None:
    store.append(
        [
            *tree_events(TREE, at(0)),
            _workload("svc", "service", "ws-eas"),  # type: ignore[list-item]
            _workload("nb", "notebook", "ws-eas"),  # type: ignore[list-item]
            occ_started("svc-0", "svc", "ws-eas", at(10), mgpu=2000, cpu=1000),
            occ_started("svc-1", "svc", "ws-eas", at(20), mgpu=2000, cpu=1000),
            occ_started("nb-0", "nb", "ws-eas", at(30), mgpu=1000, cpu=1000),
            occ_started("job-0", "job", "ws-dlc", at(15), mgpu=4000, cpu=1000),
            # training borrowing on the inference side: a pod of the train quota's job
            occ_started("job-1", "job", "ws-dlc", at(16), mgpu=6000, cpu=1000),
            occ_ended("svc-1", "svc", at(100)),
            occ_ended("job-1", "job", at(200)),
        ]
    )
    Projector(store, [QuotaProjection()]).catch_up()


def test_each_kind_s_part_of_every_node_adds_up_to_its_used(store: PostgresEventStore) -> None:
    _world(store)
    with store.engine.connect() as conn:
        for second in (5, 12, 25, 35, 150, 250):
            when, kinds = used_by_kind(conn, at(second))
            assert when == at(second)
            rows = usage_at(conn, at(second))
            for row in rows:
                parts = kinds.get((row.quota, row.flavor), {})
                assert sum(parts.values()) == row.used, (second, row)
        _, kinds = used_by_kind(conn, at(35))
    assert kinds[("pool", "gpu/any")] == {"training": 10000, "service": 4000, "notebook": 1000}
    assert kinds[("infer", "gpu/any")] == {"service": 4000, "notebook": 1000}
    assert kinds[("train", "gpu/any")] == {"training": 10000}
    assert kinds[("infer", "cpu")] == {"service": 2000, "notebook": 1000}
    with store.engine.connect() as conn:
        latest, kinds = used_by_kind(conn)
    assert latest == at(200)
    assert kinds[("pool", "gpu/any")] == {"training": 4000, "service": 2000, "notebook": 1000}


def test_quota_usage_by_kind_in_the_cli_and_the_api_tree(
    store: PostgresEventStore, cli: CliCall
) -> None:
    _world(store)
    rows = json.loads(
        cli("report", "quota-usage", "--by-kind", "--at", at(35).isoformat(), "--format", "json")
    )
    pool = next(r for r in rows if (r["quota"], r["flavor"]) == ("pool", "gpu/any"))
    assert (pool["used"], pool["used_training"], pool["used_service"], pool["used_notebook"]) == (
        15000,
        10000,
        4000,
        1000,
    )
    table = cli("report", "quota-usage", "--by-kind", "--at", at(35).isoformat())
    assert "used_service" in table
    plain = json.loads(cli("report", "quota-usage", "--at", at(35).isoformat(), "--format", "json"))
    assert "used_service" not in plain[0]
