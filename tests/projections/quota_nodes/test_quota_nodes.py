"""Quota figures at every node of the demo's 3-level tree (issue 28: cohort-level usage,
lendable now and pending per subtree), from events through the projections on real
PostgreSQL and through ``quotas tree``, against figures computed by hand.

The demo tree in gpu/any (mGPU): openb 80000 > online 40000 (pool 4000) > ls 32000,
guaranteed 4000 (lend_limit 2000); openb > offline 20000 (pool 4000) > burstable 16000
(max 48000), be 0 (max 40000). From 01:00 to 03:00: ls runs 40000 (borrows 8000),
burstable 10000, be 6000 (borrows it all); a job of 3000 waits on be.

Lending, by the rules of ledger/quotas/usage.py: online's children borrow 8000: its pool
lends 4000, guaranteed 2000 (its lend_limit: a node never lends beyond it), and online
borrows the other 2000 from openb (whose pool lends them) and passes them down (online
lent 6000). offline's borrow 6000: its pool 4000, burstable 2000. Lendable now:
burstable 16000 - 10000 unused, 2000 lent: 4000; offline's pool left 4000, nothing lent
outside: 4000; guaranteed lent its limit: 0; online has nothing left: 0; a root lends to
nobody: 0. With nothing running, online could lend its pool, ls's 32000 and guaranteed's
2000: 38000 (the dispatcher's subtree quota of online).

Available (the dispatcher's Kueue arithmetic, ledger/dispatch/capacity.py): guaranteed
holds back 4000 - 2000 = 2000 (its lend_limit), so openb's subtree quota is 20000 + 38000
+ 20000 = 78000, and 56000 used leaves 22000 to any node; guaranteed adds its idle 2000.
"""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from pathlib import Path

from dlc_ledger.services.billing import publish_price_book
from ledger.store.postgres import PostgresEventStore
from projections.quotas.nodes import quota_nodes_at
from projections.registry import catch_up_all
from tests.support.billing import at as instant
from tests.support.billing import book_yaml
from tests.support.clis import CliCall
from tests.support.demo_files import DEMO_QUOTAS as DEMO
from tests.support.quotas import at, occ_ended, occ_started, submitted

HOUR = 3600
FIGURES = ("min", "max", "used", "borrowed", "lent", "lendable", "queued", "pending_jobs",
           "running_jobs", "available")  # fmt: skip
#: gpu/any at 02:00, by hand (module docstring)
EXPECTED = {
    "openb": (80000, 80000, 56000, 0, 2000, 0, 3000, 1, 3, 22000),
    "online": (40000, 80000, 40000, 2000, 6000, 0, 0, 0, 1, 22000),
    "ls": (32000, 80000, 40000, 8000, 0, 0, 0, 0, 1, 22000),
    "guaranteed": (4000, 80000, 0, 0, 2000, 0, 0, 0, 0, 24000),
    "offline": (20000, 80000, 16000, 0, 4000, 4000, 3000, 1, 2, 22000),
    "burstable": (16000, 48000, 10000, 0, 2000, 4000, 0, 0, 1, 22000),
    "be": (0, 40000, 6000, 6000, 0, 0, 3000, 1, 1, 22000),
}
#: GPU-hours over 11-01 (2 h each) and their cost at 2.40 per GPU-hour, in cents
GPU_HOURS = {"openb": 112, "online": 80, "ls": 80, "guaranteed": 0, "offline": 32,
             "burstable": 20, "be": 12}  # fmt: skip


def _history(store: PostgresEventStore, cli: CliCall) -> None:
    cli("quotas", "apply", str(DEMO), "--at", "2026-11-01")
    publish_price_book(store, book_yaml("b1", "2026-10-01T00:00:00Z"), at=instant("2026-10-01"))
    store.append(
        [
            occ_started("p1", "j1", "ws-ls", at(HOUR), mgpu=40000, cpu=0, memory=0),
            occ_started("p2", "j2", "ws-burstable", at(HOUR), mgpu=10000, cpu=0, memory=0),
            occ_started("p3", "j3", "ws-be", at(HOUR), mgpu=6000, cpu=0, memory=0),
            submitted("q1", "ws-be", at(HOUR), mgpu=3000, cpu=0, memory=0),
            *(occ_ended(f"p{i}", f"j{i}", at(3 * HOUR)) for i in (1, 2, 3)),
        ]
    )
    catch_up_all(store)  # reads never project: the projector (here, the test) does


def test_every_node_by_hand_through_the_read_function(
    store: PostgresEventStore, cli: CliCall, tmp_path: Path
) -> None:
    _history(store, cli)
    # a later tree change (at 05:00 offline's pool grows, guaranteed lends more) leaves
    # the figures at 02:00 alone: they are read under the tree in force then
    bigger = tmp_path / "bigger.yaml"
    bigger.write_text(
        DEMO.read_text()
        .replace("min: {gpu/any: 20000, cpu: 300000", "min: {gpu/any: 30000, cpu: 300000")
        .replace("lend_limit: {gpu/any: 2000}", "lend_limit: {gpu/any: 3000}")
    )
    assert "changed quota offline" in cli(
        "quotas", "apply", str(bigger), "--at", "2026-11-01T05:00Z"
    )
    cli("report", "quota-usage")  # brings the quota projection up to date
    with store.engine.connect() as conn:
        nodes = quota_nodes_at(conn, at(2 * HOUR))
    got = {
        f.usage.quota: tuple(f.as_json()[n] for n in FIGURES)
        for f in nodes.flavors
        if f.usage.flavor == "gpu/any"
    }
    assert got == EXPECTED
    # inner nodes are sums of their children; lent equals borrowed over the tree
    for inner, kids in (("online", ("ls", "guaranteed")), ("offline", ("burstable", "be"))):
        assert got[inner][2] == sum(got[k][2] for k in kids)
        assert got[inner][6] == sum(got[k][6] for k in kids)
    assert sum(v[3] for v in got.values()) == sum(v[4] for v in got.values()) == 16000
    assert nodes.parents == {"openb": None, "online": "openb", "ls": "online",
                             "guaranteed": "online", "offline": "openb",
                             "burstable": "offline", "be": "offline"}  # fmt: skip
    with store.engine.connect() as conn:
        later = quota_nodes_at(conn, at(4 * HOUR))
    idle = {f.usage.quota: f.lendable for f in later.flavors if f.usage.flavor == "gpu/any"}
    # nothing runs: every non-root node could lend its whole min, within its lend_limit
    # (online: all but the 2000 guaranteed holds back)
    assert idle == {"openb": 0, "online": 38000, "ls": 32000, "guaranteed": 2000,
                    "offline": 20000, "burstable": 16000, "be": 0}  # fmt: skip
    with store.engine.connect() as conn:
        grown = quota_nodes_at(conn, at(6 * HOUR))
    lendable = {f.usage.quota: f.lendable for f in grown.flavors if f.usage.flavor == "gpu/any"}
    assert (lendable["offline"], lendable["guaranteed"]) == (30000, 3000)


def test_the_tree_through_the_cli_with_gpu_hours_and_cost(
    store: PostgresEventStore, cli: CliCall
) -> None:
    _history(store, cli)
    window = ("--from", "2026-11-01", "--to", "2026-11-02")
    rows = json.loads(cli("quotas", "tree", "--at", "2026-11-01T02:00Z", *window,
                          "--format", "json"))  # fmt: skip
    gpu = {r["quota"]: r for r in rows if r["flavor"] == "gpu/any"}
    assert {q: tuple(r[n] for n in FIGURES) for q, r in gpu.items()} == EXPECTED
    assert list(gpu) == ["openb", "offline", "be", "burstable", "online", "guaranteed", "ls"]
    for quota, hours in GPU_HOURS.items():
        r = gpu[quota]
        assert Decimal(str(r["gpu_hours"])) == hours, quota
        assert r["mgpu_seconds"] == hours * 1000 * HOUR, quota
        assert r["cost_minor"] == hours * 240 and r["currency"] == "USD", quota
        assert r["cost"] == f"{Decimal(hours * 240) / 100:.2f}", quota
        assert r["at"] == "2026-11-01T02:00:00Z" and r["unit"] == "mGPU"
    table = cli("quotas", "tree", "--at", "2026-11-01T02:00Z", *window)
    assert "lendable" in table.splitlines()[0] and "268.80" in table  # openb: 112 h x 2.40
    out = cli("quotas", "tree", "--at", "2026-11-01T02:00Z", "--format", "csv")
    by_csv = {r["quota"]: r for r in csv.DictReader(io.StringIO(out)) if r["flavor"] == "gpu/any"}
    assert by_csv["burstable"]["lendable"] == "4000" and "gpu_hours" not in by_csv["burstable"]
    refused = cli("quotas", "tree", "--from", "2026-11-02", "--to", "2026-11-01", ok=False)
    assert "--from" in refused or "--to" in refused


def test_an_inner_node_series_at_each_step(store: PostgresEventStore, cli: CliCall) -> None:
    _history(store, cli)
    out = cli("report", "quota-series", "offline", "--from", "2026-11-01T00:30Z",
              "--to", "2026-11-01T03:00Z", "--step", "hour", "--format", "csv")  # fmt: skip
    rows = [r for r in csv.DictReader(io.StringIO(out)) if r["flavor"] == "gpu/any"]
    figures = ("used", "borrowed", "lent", "queued", "pending_jobs")
    assert [(r["at"], *(int(r[n]) for n in figures)) for r in rows] == [
        ("2026-11-01T00:00:00Z", 0, 0, 0, 0, 0),  # the step holding --from
        ("2026-11-01T01:00:00Z", 16000, 0, 4000, 3000, 1),
        ("2026-11-01T02:00:00Z", 16000, 0, 4000, 3000, 1),
        # [start, end): the pods ended at 03:00; their jobs did not end, so they queue
        # again (a job queues between pods): 10000 + 6000 + the waiting 3000
        ("2026-11-01T03:00:00Z", 0, 0, 0, 19000, 3),
    ]
    assert {r["quota"] for r in csv.DictReader(io.StringIO(out))} == {"offline"}
    table = cli("report", "quota-series", "offline", "--from", "2026-11-01",
                "--to", "2026-11-02", "--step", "day")  # fmt: skip
    assert "2026-11-01T00:00:00Z" in table and "2026-11-02T00:00:00Z" in table
    unknown = cli("report", "quota-series", "nope", "--from", "2026-11-01",
                  "--to", "2026-11-02", ok=False)  # fmt: skip
    assert "nope" in unknown and "offline" in unknown
    bad_step = cli("report", "quota-series", "offline", "--from", "2026-11-01",
                   "--to", "2026-11-02", "--step", "minute", ok=False)  # fmt: skip
    assert "--step 'minute'" in bad_step


def test_an_empty_store_has_an_empty_tree(cli: CliCall) -> None:
    assert json.loads(cli("quotas", "tree", "--format", "json")) == []
    window = ("--from", "2026-11-01", "--to", "2026-11-02", "--format", "json")
    assert json.loads(cli("quotas", "tree", *window)) == []
