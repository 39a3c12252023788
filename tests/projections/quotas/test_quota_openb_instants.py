"""Queue figures at an instant on the openb trace (alibaba/clusterdata, CC BY 4.0).

A job's events come from two watchers (the job's: JobSubmitted, JobSucceeded; its pods':
JobStarted, OccupancyStarted, OccupancyEnded), so its end may be stored before its
start. At 20 instants, per leaf quota of the demo tree: ``running_jobs`` equals the jobs
occupying at T (the occupancy projection, grouped by the job's quota), and the queued
jobs and queued demand are the jobs submitted, not ended and not occupying at T, straight
from the trace.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from datetime import timedelta

from consumers.projector import Projector
from kubesim.traces import load_openb
from ledger.envelopes import Envelope
from ledger.store.postgres import PostgresEventStore
from projections.inventory.occupancy import OccupancyProjection, occupied_at
from projections.quotas.projection import QuotaProjection
from projections.quotas.reads import usage_at
from projections.registry import all_projections
from tests.projections.quotas.test_quota_projection import TREE
from tests.projections.quotas.throughput import openb_events
from tests.support.clis import CliCall
from tests.support.quotas import at, occ_started, submitted, tree_events

LEAVES = {"ws-ls": "ls", "ws-guaranteed": "guaranteed", "ws-burstable": "burstable", "ws-be": "be"}
_JOB_WATCHER = frozenset({"JobSubmitted", "JobSucceeded"})


def _two_watchers(events: list[Envelope], rnd: random.Random) -> list[Envelope]:
    """Per job, its job watcher's and its pod watcher's events merged at random (each
    keeps its own order), jobs one after another; the tree's events first."""
    tree = [e for e in events if not e.stream.startswith("job/")]
    streams: dict[str, tuple[list[Envelope], list[Envelope]]] = {}
    for e in events:
        if e.stream.startswith("job/"):
            pair = streams.setdefault(e.stream, ([], []))
            pair[0 if e.type in _JOB_WATCHER else 1].append(e)
    out = list(tree)
    for jobs, pods in streams.values():
        i = j = 0
        while i < len(jobs) or j < len(pods):
            if j == len(pods) or (i < len(jobs) and rnd.random() < 0.5):
                out.append(jobs[i])
                i += 1
            else:
                out.append(pods[j])
                j += 1
    return out


def test_running_and_queued_at_instants_follow_the_jobs_intervals(
    store: PostgresEventStore,
) -> None:
    trace = load_openb()
    events = _two_watchers(openb_events(), random.Random(24))
    for i in range(0, len(events), 5000):
        store.append(events[i : i + 5000])
    Projector(store, [QuotaProjection(), OccupancyProjection()], page_size=2000).catch_up()

    instances = trace.instances
    first = min(i.created for i in instances)
    last = max(i.deleted or i.created for i in instances)
    instants = [first + (last - first) * k // 21 for k in range(1, 21)]
    assert len(set(instants)) == 20
    seen_running = seen_queued = 0
    with store.engine.connect() as conn:
        for t in instants:
            when = trace.epoch + timedelta(seconds=t)
            running: dict[str, int] = defaultdict(int)
            queued_jobs: dict[str, int] = defaultdict(int)
            queued_mgpu: dict[str, int] = defaultdict(int)
            for inst in instances:
                quota = LEAVES[inst.workspace]
                end = inst.deleted if inst.scheduled is not None else None
                if inst.scheduled is not None and inst.scheduled <= t < (end or t + 1):
                    running[quota] += 1
                elif inst.created <= t and (end is None or t < end):
                    queued_jobs[quota] += 1
                    queued_mgpu[quota] += inst.gpu_milli
            occupying = {r["quota"]: r["jobs"] for r in occupied_at(conn, when, ["quota"])}
            assert occupying == {q: n for q, n in running.items() if n}, f"at trace second {t}"
            rows = {(r.quota, r.flavor): r for r in usage_at(conn, when)}
            for quota in LEAVES.values():
                cpu = rows.get((quota, "cpu"))  # every openb pod asks for CPU
                got = (cpu.running_jobs, cpu.queued_jobs) if cpu else (0, 0)
                assert got == (running[quota], queued_jobs[quota]), (t, quota)
                gpu = rows.get((quota, "gpu/any"))
                assert (gpu.queued if gpu else 0) == queued_mgpu[quota], (t, quota)
                seen_running += running[quota] > 0
                seen_queued += queued_jobs[quota] > 0
    assert seen_running >= 30 and seen_queued >= 5  # the instants see a busy cluster


def test_report_occupancy_groups_pods_by_their_jobs_quota(
    store: PostgresEventStore, cli: CliCall
) -> None:
    """A pod names no quota: it counts under its job's (the workspace's binding at the
    job's submission), an explicit one under that, an unbound workspace's under ``-``."""
    store.append(
        [
            *tree_events(TREE, at(0)),
            submitted("j1", "ws-b", at(10), mgpu=500),
            occ_started("p1", "j1", "ws-b", at(20), mgpu=500),
            submitted("j2", "ws-b", at(10), mgpu=300, quota="a"),
            occ_started("p2", "j2", "ws-b", at(20), mgpu=300),
            submitted("j3", "ws-nowhere", at(10), mgpu=200),
            occ_started("p3", "j3", "ws-nowhere", at(20), mgpu=200),
        ]
    )
    Projector(store, all_projections()).catch_up()
    rows = json.loads(
        cli("report", "occupancy", "--at", at(30).isoformat(), "--group-by", "quota",
            "--format", "json")
    )  # fmt: skip
    assert [(r["quota"], r["mgpu"], r["jobs"]) for r in rows] == [
        ("-", 200, 1),
        ("a", 300, 1),
        ("b", 500, 1),
    ]
