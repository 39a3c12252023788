"""Usage and cost land on the quota the workspace was bound to when the pod started."""

from __future__ import annotations

import json
from datetime import datetime

from ledger.envelopes import Envelope, make_envelope
from ledger.events import WorkspaceBound
from ledger.ids import deterministic_id
from ledger.store.postgres import PostgresEventStore
from projections.registry import catch_up_all
from tests.support.billing import at, ended, started
from tests.support.clis import CliCall


def _bind(workspace: str, quota: str | None, when: datetime) -> Envelope:
    return make_envelope(
        WorkspaceBound(workspace=workspace, quota=quota),
        event_id=deterministic_id("test-bind", workspace, str(quota), when.isoformat()),
        stream=f"workspace/{workspace}",
        occurred_at=when,
        observed_at=when,
        source="api/test",
    )


def test_usage_follows_the_binding_in_force_when_the_pod_started(
    store: PostgresEventStore, cli: CliCall
) -> None:
    store.append([_bind("ws-a", "team-1", at("2026-11-01T00:00"))])
    store.append([started("p1", at("2026-11-02T00:00")), ended("p1", at("2026-11-02T01:00"))])
    store.append([_bind("ws-a", "team-2", at("2026-11-03T00:00"))])
    store.append(
        [
            started("p2", at("2026-11-04T00:00")),
            ended("p2", at("2026-11-04T02:00")),
            started("p3", at("2026-11-04T00:00"), quota="explicit"),  # the pod's own wins
            ended("p3", at("2026-11-04T03:00")),
            started("p4", at("2026-11-04T00:00"), workspace="ws-unbound"),
            ended("p4", at("2026-11-04T04:00")),
        ]
    )
    catch_up_all(store)  # reads never project
    rows = json.loads(cli("report", "usage", "--group-by", "quota", "--format", "json"))
    by_quota = {r["quota"]: r["mgpu_seconds"] for r in rows}
    assert by_quota == {
        "team-1": 3600 * 1000,
        "team-2": 2 * 3600 * 1000,
        "explicit": 3 * 3600 * 1000,
        "-": 4 * 3600 * 1000,  # no quota
    }
