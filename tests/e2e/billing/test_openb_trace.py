"""The openb trace (Alibaba PAI GPU cluster trace v2023, alibaba/clusterdata, CC BY 4.0)
through the real store, rater and reports, checked against a direct computation from the CSV
with the DESIGN §8 mapping."""

from __future__ import annotations

import json
from datetime import timedelta
from fractions import Fraction

from dlc_ledger.services.billing import publish_price_book
from kubesim.traces import load_openb
from ledger.store.postgres import PostgresEventStore
from processes.billing.rater import rate
from tests.support.billing import at, demo_book, ended, started
from tests.support.clis import CliCall

RATES = {"gpu": Fraction("2.40"), "cpu": Fraction("0.048"), "memory": Fraction("0.006")}
IDLE = Fraction("0.30")


def test_openb_usage_is_exact_and_cost_is_usage_times_rate(
    store: PostgresEventStore, cli: CliCall
) -> None:
    trace = load_openb()
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    events = []
    expected: dict[str, dict[str, int]] = {}
    exact_cost: dict[str, Fraction] = {}
    for inst in trace.instances:
        if inst.scheduled is None:
            continue
        assert inst.deleted is not None  # every scheduled openb pod has a deletion time
        occ = inst.job_name
        start = trace.epoch + timedelta(seconds=inst.scheduled)
        end = trace.epoch + timedelta(seconds=inst.deleted)
        mode = "idle" if inst.billing_mode == "idle" else "public"
        events.append(
            started(
                occ, start, job=occ, workspace=inst.workspace, mgpu=inst.gpu_milli,
                cpu_milli=inst.cpu_milli, memory_mib=inst.memory_mib, mode=mode,
            )
        )  # fmt: skip
        events.append(ended(occ, end, job=occ))
        seconds = max(0, inst.deleted - inst.scheduled)
        row = expected.setdefault(
            inst.workspace, {"mgpu_seconds": 0, "cpu_milli_seconds": 0, "memory_mib_seconds": 0}
        )
        row["mgpu_seconds"] += inst.gpu_milli * seconds
        row["cpu_milli_seconds"] += inst.cpu_milli * seconds
        row["memory_mib_seconds"] += inst.memory_mib * seconds
        hours = Fraction(seconds, 3600)
        cost = (
            Fraction(inst.gpu_milli, 1000) * RATES["gpu"]
            + Fraction(inst.cpu_milli, 1000) * RATES["cpu"]
            + Fraction(inst.memory_mib, 1024) * RATES["memory"]
        ) * hours
        exact_cost[inst.workspace] = exact_cost.get(inst.workspace, Fraction(0)) + (
            cost * IDLE if mode == "idle" else cost
        )
    for i in range(0, len(events), 5000):
        store.append(events[i : i + 5000])
    result = rate(store)
    assert result.unrateable == 0 and result.finals == len(events) // 2

    usage = json.loads(cli("report", "usage", "--group-by", "workspace", "--format", "json"))
    assert usage == [{"workspace": ws, **expected[ws]} for ws in sorted(expected)]

    ledger = json.loads(cli("report", "cost", "--group-by", "workspace", "--format", "json"))
    rated = json.loads(
        cli("report", "cost", "--group-by", "workspace", "--source", "rated", "--format", "json")
    )
    assert ledger == rated  # the ledger and a fresh rating round the same lines the same way
    assert [r["workspace"] for r in ledger] == sorted(exact_cost)
    with store.engine.connect() as conn:
        lines = dict(
            conn.exec_driver_sql(
                "SELECT workspace, count(*) FROM billing_line_totals l "
                "JOIN billing_occupancies o USING (occupancy_id) GROUP BY workspace"
            ).all()
        )
    for row in ledger:
        exact_minor = exact_cost[row["workspace"]] * 100
        # each line item is rounded once: at most half a cent off per line
        assert abs(row["cost_minor"] - exact_minor) <= Fraction(lines[row["workspace"]], 2)
        assert row["currency"] == "USD"
