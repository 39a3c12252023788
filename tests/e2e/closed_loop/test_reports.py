"""The waits / preemptions / goodput reports from hand-made decision and occupancy events:
every figure computed here by hand from the events' instants."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from importlib.resources import as_file, files

from consumers.projector import Projector
from dlc_ledger.services.billing import publish_price_book
from dlc_ledger.services.quotas import apply_quota_file
from dlc_ledger.services.yaml_files import load_price_book
from dlc_ledger.wiring.context import local_principal
from ledger.events import AdmissionDecided, OccupancyEnded, PreemptionDecided, Victim
from ledger.store.postgres import PostgresEventStore
from projections.dispatch.reports import (
    DecisionWindow,
    goodput_report,
    preemptions_report,
    waits_report,
)
from projections.registry import all_projections
from tests.support.clis import CliCall
from tests.support.quotas import EPOCH, at, envelope, occ_started, submitted

TREE = """
quotas:
  - name: root
    min: {gpu/any: 4000, cpu: 64000, memory: 262144}
  - name: q1
    parent: root
    min: {gpu/any: 2000, cpu: 32000, memory: 131072}
    workspaces: [ws-a]
  - name: q2
    parent: root
    min: {gpu/any: 2000, cpu: 32000, memory: 131072}
    workspaces: [ws-b]
"""


def _admit(uid: str, quota: str, seconds: float, outcome: str = "admit") -> object:
    return envelope(
        AdmissionDecided(job_uid=uid, quota=quota, outcome=outcome),  # type: ignore[arg-type]
        f"dispatch/{uid}",
        at(seconds),
    )


def _ended(occ: str, uid: str, seconds: float, reason: str) -> object:
    data = OccupancyEnded(
        occupancy_id=occ,
        job_uid=uid,
        pod_uid=occ,
        ended_at=at(seconds),
        reason=reason,  # type: ignore[arg-type]
    )
    return envelope(data, f"job/{uid}", at(seconds))


def _seed(store: PostgresEventStore) -> None:
    with as_file(files("dlc_ledger.resources") / "pricebooks" / "demo-2026.yaml") as path:
        publish_price_book(store, load_price_book(path), at=EPOCH)
    apply_quota_file(store, TREE, principal=local_principal(), at=EPOCH)
    events = [
        submitted("j1", "ws-a", at(0)),
        submitted("j2", "ws-a", at(10)),
        submitted("j3", "ws-b", at(20), mgpu=2000),
        _admit("j1", "q1", 60),
        occ_started("p1", "j1", "ws-a", at(60)),
        _admit("j2", "q1", 60, "pending"),
        _admit("j3", "q2", 60, "pending"),
        envelope(
            PreemptionDecided(
                preemptor="j2",
                victims=(Victim(job_uid="j1", quota="q1", reason="WithinQuota"),),
                reason="WithinQuota",
            ),
            "dispatch/j2",
            at(3_660),
        ),
        _ended("p1", "j1", 3_690, "deleted"),  # the grace period: held 30 s more
        _admit("j2", "q1", 3_700),
        occ_started("p2", "j2", "ws-a", at(3_700)),
        _ended("p2", "j2", 7_300, "completed"),
        _admit("j1", "q1", 7_300),
        occ_started("p3", "j1", "ws-a", at(7_300)),
        _ended("p3", "j1", 10_900, "completed"),
    ]
    store.append(events)  # type: ignore[arg-type]
    Projector(store, all_projections()).catch_up()


def test_waits_preemptions_goodput_from_the_events(store: PostgresEventStore) -> None:
    _seed(store)
    with store.engine.connect() as conn:
        waits = waits_report(conn, DecisionWindow())
        preemptions = preemptions_report(conn, DecisionWindow())
        goodput = goodput_report(conn, "quota", DecisionWindow())
        by_ws = goodput_report(conn, "workspace", DecisionWindow())
        late = waits_report(conn, DecisionWindow(start=at(3_700)))
    # j1 waited 60 s, then (requeued by the preemption at 3,660) 3,640 s; j2 3,690 s;
    # j3 is still waiting
    (q1, q2) = waits
    assert (q1["quota"], q1["waits"], q1["requeued"], q1["waiting"]) == ("q1", 3, 1, 0)
    assert q1["max_s"] == Decimal("3690.0") and q1["p50_s"] == Decimal("3640.0")
    assert q1["p95_s"] == Decimal("3685.0")  # 3,640 + 0.9 x 50, continuous
    assert (q2["quota"], q2["waits"], q2["waiting"], q2["max_s"]) == ("q2", 0, 1, None)
    assert q2["withdrawn"] == 0
    assert [(r["waits"], r["max_s"]) for r in late] == [(2, Decimal("3690.0")), (0, None)]

    (p,) = preemptions
    assert (p["preemptor"], p["victim"], p["reason"], p["victim_quota"]) == (
        "j2",
        "j1",
        "WithinQuota",
        "q1",
    )
    assert p["at"] == at(3_660) and p["victim_started_at"] == at(60)
    # 3,630 s held on 1 GPU (start to the pod's end); at the public rate, 2.40/GPU-hour
    # plus 4 cores x 0.048 and 8 GiB x 0.006 per hour
    assert p["gpu_hours_lost"] == Decimal("1.0083")
    hours = Decimal(3_630) / 3_600
    expected = hours * (Decimal("2.40") + 4 * Decimal("0.048") + 8 * Decimal("0.006"))
    assert p["currency"] == "USD"
    assert abs(p["lost_cost_minor"] - expected * 100) <= 1

    (g,) = goodput
    assert (g["quota"], g["occupancies"], g["succeeded"]) == ("q1", 3, 2)
    assert g["gpu_hours"] == round(Decimal(10_830) / 3_600, 4)
    assert g["goodput"] == round(Decimal(7_200) / Decimal(10_830), 4)
    assert [r["workspace"] for r in by_ws] == ["ws-a"]


def test_report_commands_render_the_three_reports(store: PostgresEventStore, cli: CliCall) -> None:
    _seed(store)
    (row,) = json.loads(cli("report", "preemptions", "--format", "json"))
    assert row["victim"] == "j1" and row["scale"] == 2
    assert Decimal(row["lost_cost"]) == Decimal(row["lost_cost_minor"]) / 100
    table = cli("report", "waits")
    assert "p95_s" in table and "q1" in table
    csv_out = cli("report", "goodput", "--by", "workspace", "--format", "csv")
    assert csv_out.splitlines()[0].startswith("workspace,occupancies,succeeded")
    assert "quota or workspace" in cli("report", "goodput", "--by", "user", ok=False)
    assert "window is empty" in cli(
        "report", "waits", "--from", "2026-11-02", "--to", "2026-11-01", ok=False
    )


def _preempted(victim: str, preemptor: str, seconds: float) -> object:
    return envelope(
        PreemptionDecided(
            preemptor=preemptor,
            victims=(Victim(job_uid=victim, quota="q2", reason="Reclaim"),),
            reason="Reclaim",
        ),
        f"dispatch/{preemptor}",
        at(seconds),
    )


def test_report_and_why_count_the_same_lost_work(store: PostgresEventStore, cli: CliCall) -> None:
    """``report preemptions`` and ``jobs why`` read one computation of the work lost: a
    two-pod victim loses both pods' runs (each to its end, or still releasing to the
    latest fact), not a run that ended before the decision, and a decision repeated while
    it releases loses nothing more."""
    with as_file(files("dlc_ledger.resources") / "pricebooks" / "demo-2026.yaml") as path:
        publish_price_book(store, load_price_book(path), at=EPOCH)
    apply_quota_file(store, TREE, principal=local_principal(), at=EPOCH)
    store.append(
        [  # type: ignore[list-item]
            submitted("k1", "ws-b", at(0)),
            occ_started("a", "k1", "ws-b", at(100)),
            _ended("a", "k1", 200, "deleted"),  # an earlier run, over before the decision
            occ_started("b", "k1", "ws-b", at(300)),
            occ_started("c", "k1", "ws-b", at(300)),
            _preempted("k1", "j9", 1_000),
            _preempted("k1", "j8", 1_010),  # decided again while its pods release
            _ended("b", "k1", 1_030, "deleted"),
            submitted("k2", "ws-a", at(1_100)),  # the latest fact: c still releases then
        ]
    )
    Projector(store, all_projections()).catch_up()
    first, again = json.loads(cli("report", "preemptions", "--format", "json"))
    # b held 730 s, c 800 s (to the latest fact) on 1 GPU each
    assert first["gpu_hours_lost"] == str(round(Decimal(1_530) / 3_600, 4))
    assert datetime.fromisoformat(first["victim_started_at"]) == at(300)
    assert (Decimal(again["gpu_hours_lost"]), again["victim_started_at"]) == (0, None)
    assert again["lost_cost_minor"] is None or again["lost_cost_minor"] == 0
    why = json.loads(cli("jobs", "why", "k1", "--format", "json"))
    by_preemptor = {p["preemptor"]: p for p in why["preemptions"]}
    assert by_preemptor["j9"]["lost_seconds"] == 800
    assert by_preemptor["j9"]["lost_gpu_hours"] == round(1_530 / 3_600, 6)
    assert by_preemptor["j9"]["lost_cost_minor"] == first["lost_cost_minor"] > 0
    assert by_preemptor["j8"]["lost_gpu_hours"] == 0
