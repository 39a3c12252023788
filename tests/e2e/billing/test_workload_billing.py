"""Services and notebooks billed as the platform bills them (issue 46, part 3): their own
rates where the price book gives them, the jobs' otherwise; a spilling service's replicas
beyond its quota's capacity billed pay-as-you-go, the ones within it prepaid, each decided
when it started; reports by kind, by service and by billing mode."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction

from dlc_ledger.services.billing import publish_price_book, tick
from dlc_ledger.services.quotas import apply_quota_file
from dlc_ledger.services.subscriptions import purchase
from dlc_ledger.services.yaml_files import parse_price_book
from ledger.envelopes import Envelope, make_envelope
from ledger.events import Spillover, WorkloadCreated, WorkloadKind
from ledger.ids import deterministic_id
from ledger.store.postgres import PostgresEventStore
from tests.support.billing import at, demo_book, ended, query, started
from tests.support.builders import replica
from tests.support.clis import CliCall

BOOK = """
id: workloads-2027
currency: USD
scale: 2
effective_from: "2026-10-01T00:00:00Z"
rates:
  public: {gpu/any: "2.40", cpu: "0.048", memory: "0.006"}
  spot: {gpu/any: "0.90"}
idle_multiplier: "0.30"
workload_rates:
  service: {public: {gpu/any: "3.10"}}
  notebook: {public: {gpu/any: "1.70", cpu: "0.050"}}
"""


def _workload(
    uid: str,
    when: datetime,
    *,
    workload: WorkloadKind = "service",
    workspace: str = "ws-a",
    spillover: Spillover = "none",
) -> Envelope:
    return make_envelope(
        WorkloadCreated(
            job_uid=uid,
            name=uid,
            namespace="ns1",
            workload=workload,
            workspace=workspace,
            replicas=1,
            replica=replica(mgpu=8000),
            spillover=spillover,
        ),
        event_id=deterministic_id("test-workload", uid),
        stream=f"job/{uid}",
        occurred_at=when,
        observed_at=when,
        source="kube-watcher/test",
    )


def _rows(cli: CliCall, *args: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = json.loads(cli(*args, "--format", "json"))
    return rows


def test_services_and_notebooks_pay_their_own_rates_and_jobs_the_book_s(
    store: PostgresEventStore, cli: CliCall
) -> None:
    publish_price_book(store, parse_price_book(BOOK), at=at("2026-10-01T00:00"))
    start = at("2026-11-02T00:00")
    hour = timedelta(hours=1)
    store.append(
        [
            _workload("svc", start),
            _workload("nb", start, workload="notebook"),
            started("svc-0", start, job="svc", cpu_milli=2000),
            ended("svc-0", start + 2 * hour, job="svc"),
            started("nb-0", start, job="nb", cpu_milli=2000),
            ended("nb-0", start + hour, job="nb"),
            started("train-0", start, job="train", cpu_milli=2000),
            ended("train-0", start + hour, job="train"),
        ]
    )
    tick(store, at("2026-12-03T00:00"))
    by_kind = {
        r["kind"]: r["cost_minor"] for r in _rows(cli, "report", "cost", "--group-by", "kind")
    }
    # the invoices round each line once: whole cents here, so their rounding is nothing
    assert by_kind.pop("(rounding)") == 0
    # a service's GPU at its own 3.10, its cpu (unpriced by its table) at the jobs' 0.048;
    # a notebook's GPU and cpu both at its own rates; the job at the book's
    assert by_kind == {
        "service": 2 * 310 + round(2 * 2 * 4.8),  # 6.20 + 0.19 (0.192)
        "notebook": 170 + 10,  # 1.70 + 2 x 0.050
        "training": 240 + round(2 * 4.8),  # 2.40 + 0.10 (0.096)
    }
    rated = {
        r["kind"]: r["cost_minor"]
        for r in _rows(cli, "report", "cost", "--group-by", "kind", "--source", "rated")
    }
    assert rated == by_kind
    # as recorded by an instant (the ledger's transactions then): the same split
    as_of = _rows(cli, "report", "cost", "--group-by", "kind", "--as-of", "2027-01-01T00:00:00Z")
    assert {r["kind"]: r["cost_minor"] for r in as_of if r["kind"] != "(rounding)"} == by_kind
    by_service = _rows(cli, "report", "cost", "--group-by", "service", "--source", "rated")
    assert {r["service"]: r["cost_minor"] for r in by_service} == {
        "ns1/svc": by_kind["service"],
        "-": by_kind["notebook"] + by_kind["training"],
    }
    usage = _rows(cli, "report", "usage", "--group-by", "kind")
    assert {r["kind"]: r["mgpu_seconds"] for r in usage} == {
        "service": 2 * 3600 * 1000,
        "notebook": 3600 * 1000,
        "training": 3600 * 1000,
    }


TREE = """
quotas:
  - name: root
    min: {gpu/any: 16000}
    resource_groups: [gpu-g2]
  - name: team
    parent: root
    min: {gpu/any: 16000}
    workspaces: [ws-sub]
"""


def _subscribed(store: PostgresEventStore, tree: str) -> None:
    """The demo book, 16 subscribed GPUs (2 nodes of group gpu-g2) and ``tree`` on them."""
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    purchase(
        store, group="gpu-g2", spec="ml.g2.8xlarge", nodes=2, term="year", workspace="ws-sub",
        principal="test", at=at("2027-01-01T00:00"), key="two",
    )  # fmt: skip
    apply_quota_file(store, tree, principal="test", at=at("2027-01-02T00:00"))


def test_a_spilling_service_pays_for_the_replicas_beyond_its_quota_only(
    store: PostgresEventStore, cli: CliCall
) -> None:
    _subscribed(store, TREE)
    t0 = at("2027-01-03T00:00")
    minute = timedelta(minutes=1)
    # replicas of 8 GPUs on a 16-GPU quota: r1 and r2 fill it, r3 spills while they hold
    # it; once r1 has ended, r4 fits again. A training job's 8 GPUs hold capacity too.
    # Uneven seconds, so the public amount is not a whole number of cents.
    intervals = {
        "r1": (t0, t0 + 61 * minute),
        "r2": (t0 + minute, t0 + 300 * minute),
        "r3": (t0 + 2 * minute, t0 + 97 * minute + timedelta(seconds=7)),
        "r4": (t0 + 62 * minute, t0 + 130 * minute + timedelta(seconds=13)),
        "r5": (t0 + 63 * minute, t0 + 64 * minute + timedelta(seconds=1)),
    }
    timed = [(t0, _workload("svc", t0, workspace="ws-sub", spillover="public"))]
    for pod, (a, b) in intervals.items():
        timed += [
            (a, started(pod, a, job="svc", workspace="ws-sub", mgpu=8000)),
            (b, ended(pod, b, job="svc")),
        ]
    # the job holds 8 GPUs from r4's start on: r5 finds r2, r4 and the job: 24 > 16
    job_start = t0 + 62 * minute + timedelta(seconds=30)
    timed += [
        (job_start, started("job-0", job_start, workspace="ws-sub", mgpu=8000)),
        (t0 + 200 * minute, ended("job-0", t0 + 200 * minute)),
    ]
    # in cluster time, as the watcher publishes: the quota's state at a start is the store's
    store.append([e for _, e in sorted(timed, key=lambda pair: pair[0])])
    tick(store, at("2027-02-03T00:00"))
    modes = dict(query(store, "SELECT occupancy_id, billing_mode FROM billing_occupancies"))
    assert modes == {
        "r1": "quota", "r2": "quota", "r3": "public", "r4": "quota", "r5": "public",
        "job-0": "quota",
    }  # fmt: skip
    shown = json.loads(cli("services", "show", "svc", "--format", "json"))
    assert {r["occupancy_id"]: r["billing_mode"] for r in shown["replicas_billed"]} == {
        p: m for p, m in modes.items() if p.startswith("r")
    }
    spilled = sum(
        (Fraction(int((b - a).total_seconds())) for p, (a, b) in intervals.items()
         if modes[p] == "public"),
        Fraction(0),
    )  # fmt: skip
    exact = spilled / 3600 * 8 * Fraction("2.40") * 100  # cents, at the jobs' rate
    expected = int(Decimal(exact.numerator / Decimal(exact.denominator)).quantize(
        Decimal(1), rounding=ROUND_HALF_EVEN))  # fmt: skip
    rows = _rows(cli, "report", "cost", "--group-by", "service,billing_mode")
    split = {(r["service"], r["billing_mode"]): r["cost_minor"] for r in rows}
    assert split[("ns1/svc", "public")] == expected
    assert split[("ns1/svc", "quota")] == 0  # the baseline: prepaid
    precise = {
        (r["service"], r["billing_mode"]): Decimal(str(r["cost_minor_precise"])) for r in rows
    }
    assert abs(precise[("ns1/svc", "public")] - Decimal(exact.numerator) / exact.denominator) < (
        Decimal("0.5")
    )
    lines = query(
        store,
        "SELECT l.billing_mode, l.amount_minor, l.description FROM billing_invoice_lines l "
        "JOIN billing_invoices i USING (invoice_id) "
        "WHERE i.period = '2027-01' AND l.job_uid = 'svc' ORDER BY 1",
    )
    # the invoice shows the service's spill and its prepaid baseline on lines of their own
    assert [(mode, amount) for mode, amount, _ in lines] == [("public", expected), ("quota", 0)]
    assert all(", service ns1/svc: " in description for _, _, description in lines)
    (job_line,) = query(
        store,
        "SELECT l.billing_mode, l.amount_minor FROM billing_invoice_lines l "
        "JOIN billing_invoices i USING (invoice_id) WHERE i.period = '2027-01' "
        "AND i.workspace = 'ws-sub' AND l.job_uid IS NULL AND l.resource = 'gpu/any'",
    )
    assert tuple(job_line) == ("quota", 0)  # the training job: prepaid, its own line


POOL = """
quotas:
  - name: pool
    min: {gpu/any: 16000}
    resource_groups: [gpu-g2]
  - name: train
    parent: pool
    min: {gpu/any: 8000}
    workspaces: [ws-sub]
"""


def test_a_service_on_the_parent_quota_shares_its_pool_with_the_children(
    store: PostgresEventStore,
) -> None:
    # the platform's integrated example: inference on the parent quota, training on a
    # child; the parent's 16 GPUs are the pool both draw on, so a replica spills only
    # once the pool is held, training's part included
    _subscribed(store, POOL)
    t0 = at("2027-01-03T00:00")
    minute = timedelta(minutes=1)
    store.append(
        [
            _workload("svc", t0, workspace="ws-sub", spillover="public"),
            started("job-0", t0, workspace="ws-sub", mgpu=8000),
            started("r1", t0 + minute, job="svc", workspace="ws-sub", quota="pool", mgpu=8000),
            started("r2", t0 + 2 * minute, job="svc", workspace="ws-sub", quota="pool", mgpu=8000),
            ended("job-0", t0 + 3 * minute),
            started("r3", t0 + 4 * minute, job="svc", workspace="ws-sub", quota="pool", mgpu=8000),
        ]
    )
    tick(store, at("2027-01-04T00:00"))
    modes = dict(query(store, "SELECT occupancy_id, billing_mode FROM billing_occupancies"))
    assert modes == {"job-0": "quota", "r1": "quota", "r2": "public", "r3": "quota"}
