"""``services list|show`` and ``notebooks list``: a service's replicas over time, occupancy,
cost and quota; notebooks apart; training jobs stay ``jobs`` (issue 46, part 2 in part)."""

from __future__ import annotations

import json

from ledger.store.postgres import PostgresEventStore
from tests.support.clis import CliCall
from tests.support.workloads import service_world


def test_a_service_shows_its_replicas_over_time_occupancy_and_cost(
    store: PostgresEventStore, cli: CliCall
) -> None:
    service_world(store)
    (svc,) = json.loads(cli("services", "list", "--format", "json"))
    assert (svc["job_uid"], svc["kind"], svc["replicas"], svc["status"]) == (
        "svc",
        "Deployment",
        2,
        "Stopped",
    )
    shown = json.loads(cli("services", "show", "ranker", "--format", "json"))
    assert [(h["change"], h["replicas"], h["by"]) for h in shown["replica_history"]] == [
        ("created", 1, "alice"),
        ("scaled", 2, "eas-autoscaler"),
        ("deleted", 0, None),
    ]
    assert shown["replica_history"][1]["at"] == "2026-11-01T00:10:00Z"
    (occupied,) = shown["occupied"]
    assert occupied["mgpu_seconds"] == 1000 * (3600 + 3000) and occupied["occupancies"] == 2
    # 6,600 GPU-seconds at 3.60 an hour: 6.60 USD
    (cost,) = shown["cost"]
    assert (cost["rated"], cost["currency"]) == ("6.60", "USD")
    table = cli("services", "show", "svc")
    assert "replicas over time:" in table and "eas-autoscaler" in table


def test_notebooks_and_training_jobs_are_apart(store: PostgresEventStore, cli: CliCall) -> None:
    service_world(store)
    (nb,) = json.loads(cli("notebooks", "list", "--format", "json"))
    assert (nb["job_uid"], nb["framework"], nb["kind"]) == ("nb", "notebook", "StatefulSet")
    assert {j["job_uid"] for j in json.loads(cli("jobs", "list", "--format", "json"))} == {
        "svc",
        "nb",
        "train",
    }
    assert "training job" in cli("services", "show", "train", ok=False)
    assert "no workspace 'ws-zz'" in cli("services", "list", "--workspace", "ws-zz", ok=False)
