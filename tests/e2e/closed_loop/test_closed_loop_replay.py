"""A closed-loop replay of an openb slice through the live dispatcher, its reports checked
against the events read independently from the store.

The slice (the first 150 openb jobs that are not best-effort, written as an openb CSV) and
``closed-loop.yaml`` (24 GPUs guaranteed for a ~38-GPU peak) make jobs queue for days, and the
guaranteed job reclaims from a borrowing latency-sensitive one: a preemption. (Best-effort
jobs are left out: their idle-mode victims are re-admitted into the capacity their
preemptor freed, cycle after cycle; see docs/dispatch.md.) Every figure of ``report waits
| preemptions | goodput`` is recomputed here from the raw events (JobSubmitted,
AdmissionDecided, PreemptionDecided, OccupancyStarted/Ended), not from the read models the
reports use.
"""

from __future__ import annotations

import csv
import io
import math
import time
from collections import defaultdict
from datetime import datetime
from decimal import Decimal
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from dlc_ledger.wiring.replay import run_replay
from kubesim.traces import OPENB_PODS_CSV
from ledger.store.postgres import PostgresEventStore
from ledger.store.schema import events as events_table
from projections.dispatch.estimates import projected_now
from projections.dispatch.reports import (
    DecisionWindow,
    estimate_coverage,
    estimates_report,
    goodput_report,
    preemptions_report,
    waits_report,
)
from tests.support.clis import CliCall

SLICE = 150
#: workspace -> leaf quota, as closed-loop.yaml binds them
BINDINGS = {"ws-ls": "ls", "ws-guaranteed": "guaranteed", "ws-burstable": "burstable"}


def _events(store: PostgresEventStore, *types: str) -> list[Any]:
    with store.engine.connect() as conn:
        return list(
            conn.execute(
                select(
                    events_table.c.position,
                    events_table.c.event_id,
                    events_table.c.type,
                    events_table.c.occurred_at,
                    events_table.c.data,
                )
                .where(events_table.c.type.in_(types))
                .order_by(events_table.c.position)
            ).all()
        )


def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    pos = q * (len(values) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (pos - low)


def _expected_waits(store: PostgresEventStore) -> dict[tuple[str, int], list[float]]:
    """(quota, priority) -> waits in seconds, from the raw events."""
    submitted = {e.data["job_uid"]: e for e in _events(store, "JobSubmitted")}
    marks: dict[str, list[tuple[datetime, int, str, str | None]]] = defaultdict(list)
    for e in _events(store, "PreemptionDecided"):
        for v in e.data["victims"]:
            marks[v["job_uid"]].append((e.occurred_at, e.position, "queued", None))
    for e in _events(store, "AdmissionDecided"):
        if e.data["outcome"] == "admit":
            marks[e.data["job_uid"]].append((e.occurred_at, e.position, "admit", e.data["quota"]))
    waits: dict[tuple[str, int], list[float]] = defaultdict(list)
    for uid, job_marks in marks.items():
        sub = submitted[uid]
        job_marks.append((sub.occurred_at, sub.position, "queued", None))
        queued: datetime | None = None
        for at, _, kind, quota in sorted(job_marks):
            if kind == "queued":
                queued = queued or at
            elif queued is not None:
                assert quota is not None
                waits[(quota, sub.data["priority"])].append((at - queued).total_seconds())
                queued = None
    return waits


def _occupancies(store: PostgresEventStore) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for e in _events(store, "OccupancyStarted", "OccupancyEnded"):
        entry = out.setdefault(e.data["occupancy_id"], {})
        if e.type == "OccupancyStarted":
            entry.update(
                job=e.data["job_uid"],
                mgpu=e.data["mgpu"],
                workspace=e.data["workspace"],
                start=_ts(e.data["started_at"]),
            )
        else:
            entry.update(end=_ts(e.data["ended_at"]), reason=e.data["reason"])
    return out


def _slice(path: Path) -> Path:
    """The first ``SLICE`` openb rows that are not best-effort, as an openb pod CSV."""
    rows = list(csv.DictReader(io.StringIO(OPENB_PODS_CSV.read_text())))
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows([r for r in rows if r["qos"] != "BE"][:SLICE])
    return path


@pytest.fixture
def replayed(store: PostgresEventStore, bootstrap: str, tmp_path: Path) -> dict[str, Any]:
    started = time.monotonic()
    pods = _slice(tmp_path / "slice.csv")
    resources = files("dlc_ledger.resources")
    with (
        as_file(resources / "quotas" / "closed-loop.yaml") as tree,
        as_file(resources / "pricebooks" / "demo-2026.yaml") as book,
    ):
        summary = run_replay(
            str(pods),
            "openb",
            quotas=tree,
            pricebook=book,
            store=store,
            bootstrap=bootstrap,
            data_dir=tmp_path,
            closed_loop=True,
            cycle=60,
            progress=None,
            timeout=600,
        )
    return {"summary": summary, "wall": time.monotonic() - started}


def test_closed_loop_slice_queues_preempts_and_reports_match_the_events(
    store: PostgresEventStore, replayed: dict[str, Any]
) -> None:
    summary = replayed["summary"]
    figures = summary.closed_loop
    print("\n".join(summary.lines()), f"\nwall {replayed['wall']:.1f} s")
    assert summary.ok and summary.dead_letters == 0 and summary.projected
    assert figures is not None and figures.jobs == SLICE
    assert figures.never_admitted == 0 and figures.unfinished == []
    assert figures.preemptions >= 1  # a borrower reclaimed
    assert figures.wait_max_s is not None and figures.wait_max_s > 0  # jobs queued

    with store.engine.connect() as conn:
        waits = waits_report(conn, DecisionWindow())
        preemptions = preemptions_report(conn, DecisionWindow())
        goodput = goodput_report(conn, "quota", DecisionWindow())

    # waits: per (quota, priority), recomputed from JobSubmitted / PreemptionDecided /
    # AdmissionDecided
    expected = _expected_waits(store)
    assert {(r["quota"], r["priority"]) for r in waits if r["waits"]} == set(expected)
    for row in waits:
        values = expected.get((row["quota"], row["priority"]), [])
        assert row["waits"] == len(values) and row["waiting"] == 0
        if values:
            assert row["max_s"] == Decimal(str(round(max(values), 1)))
            assert abs(float(row["p50_s"]) - _percentile(values, 0.5)) <= 0.05
            assert abs(float(row["p95_s"]) - _percentile(values, 0.95)) <= 0.05
    assert sum(len(v) for v in expected.values()) == figures.waits
    # jobs deleted while still queued (rows the trace never ran), once decided on
    deleted = {e.data["job_uid"] for e in _events(store, "JobDeleted")}
    decisions = _events(store, "AdmissionDecided")
    decided = {e.data["job_uid"] for e in decisions}
    ever_admitted = {e.data["job_uid"] for e in decisions if e.data["outcome"] == "admit"}
    assert sum(r["withdrawn"] for r in waits) == len((deleted & decided) - ever_admitted) > 0
    assert any(r["requeued"] for r in waits)  # a victim's wait after its preemption

    # preemptions: exactly the stored PreemptionDecided victims, losses from occupancy
    # events: the victim's pods open at the decision, each to its end (or, still
    # releasing, the latest projected fact), none counted by two decisions of a job
    stored = _events(store, "PreemptionDecided")
    assert {(str(e.event_id), v["job_uid"]) for e in stored for v in e.data["victims"]} == {
        (r["event_id"], r["victim_uid"]) for r in preemptions
    }
    occupancies = _occupancies(store)
    with store.engine.connect() as conn:
        now = projected_now(conn)
    assert now is not None
    decided_at = {str(e.event_id): e.occurred_at for e in stored}
    counted: set[str] = set()
    for row in preemptions:  # in decision order
        at = decided_at[row["event_id"]]
        runs = {
            occ: o
            for occ, o in occupancies.items()
            if o["job"] == row["victim_uid"]
            and o["start"] <= at
            and o.get("end", at) >= at
            and occ not in counted
        }
        counted.update(runs)
        held = {occ: (o.get("end", now) - o["start"]).total_seconds() for occ, o in runs.items()}
        mgpu_s = sum(held[occ] * o["mgpu"] for occ, o in runs.items())
        assert row["victim_started_at"] == min((o["start"] for o in runs.values()), default=None)
        assert row["gpu_hours_lost"] == round(Decimal(mgpu_s) / 3_600_000, 4)
        assert row["reason"] and row["preemptor"] != row["victim"]
        if mgpu_s > 0:
            assert row["lost_cost_minor"] > 0 and row["currency"] == "USD"

    # goodput per quota: from the occupancy events and the tree's bindings
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for o in occupancies.values():
        if "end" not in o:
            continue
        gpu_s = (o["end"] - o["start"]).total_seconds() * o["mgpu"]
        totals[BINDINGS[o["workspace"]]][0] += gpu_s
        if o["reason"] == "completed":
            totals[BINDINGS[o["workspace"]]][1] += gpu_s
    assert {r["quota"] for r in goodput} == set(totals)
    for row in goodput:
        total, good = totals[row["quota"]]
        assert abs(float(row["gpu_hours"]) - total / 3_600_000) < 1e-3
        if total:
            assert abs(float(row["goodput"]) - good / total) < 1e-3
    assert any(float(r["goodput"] or 1) < 1 for r in goodput)  # lost work shows

    # a preemptor is never admitted in the cycle that preempts
    admitted = defaultdict(list)
    for e in _events(store, "AdmissionDecided"):
        if e.data["outcome"] == "admit":
            admitted[e.data["job_uid"]].append(e.occurred_at)
    for e in stored:
        assert e.occurred_at not in admitted[e.data["preemptor"]]

    # start estimates: each wait's first stored range (the 10th-90th percentile start of
    # simulated futures, jobs long or short together) against its admission; measured: 82 of
    # 85 inside (96.5 %)
    with store.engine.connect() as conn:
        rows = estimates_report(conn)
        coverage = estimate_coverage(conn)
    for row in rows:
        print(" ".join(f"{k}={v}" for k, v in row.items()))
    print(f"ranges: {coverage}, inside {coverage.coverage:.1%}")
    (everyone,) = [r for r in rows if r["quota"] == "(all)"]
    assert (everyone["waits"], everyone["ranged"]) == (coverage.waits, coverage.ranged)
    assert coverage.ranged >= 80 and coverage.inside + coverage.below + coverage.above == (
        coverage.ranged
    )
    assert coverage.coverage is not None and coverage.coverage >= 0.9
    assert replayed["wall"] < 180


def test_closed_loop_needs_a_quota_tree(cli: CliCall) -> None:
    out = cli("replay", "--trace", "openb", "--closed-loop", "--limit", "5", ok=False)
    assert "--quotas" in out


def test_what_if_options_refuse_what_they_cannot_do(cli: CliCall) -> None:
    tree = "dlc_ledger/resources/quotas/demo.yaml"
    cases = [
        (["--window", "2027-03-11"], "FROM/TO"),
        (["--window", "2027-03-12/2027-03-11"], "start at or after"),
        (["--window", "2020-01-01/2020-01-02"], "start at or after"),
        (["--policy", "Fastest", "--closed-loop", "--quotas", tree], "is not one of"),
        (["--scale-quotas", "0", "--closed-loop", "--quotas", tree], "above 0"),
        (["--scale-quotas", "x", "--closed-loop", "--quotas", tree], "above 0"),
        (["--policy", "FIFO"], "reshape --quotas"),
        (["--until", "2027-03-11T12:00Z"], "--closed-loop"),
    ]
    for args, message in cases:
        out = cli("replay", "--trace", "openb", *args, ok=False)
        assert message in out, (args, out)
    out = cli("--run", "Bad Name", "replay", "--trace", "openb", "--closed-loop", "--quotas",
              tree, ok=False)  # fmt: skip
    assert "run name" in out
