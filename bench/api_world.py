"""The store ``python -m bench api`` reads: months of a busy cluster, shaped like production.

A quota tree (one root, departments, leaf quotas, two workspaces bound to each leaf) and
the demo price book are applied through the services the CLI uses (``quotas apply``,
``prices publish``); then jobs, each with its production life: ``JobSubmitted``,
``JobQueued``, ``JobAdmitted``, ``JobStarted``, ``OccupancyStarted``, ``OccupancyEnded``
and ``JobSucceeded`` (one in twenty ``JobFailed``), jobs lasting minutes to hours so a few
hundred run at once, the last ones still running. Events go in through the store's
batched binary COPY append (the hash chain computed as in production), every projection
is built by the projector lanes (``dlc-ledger project --workers N``), the rater posts
the usage (``LedgerTransactionPosted``, three resources per occupancy) and the lanes
project those too. Nothing is written to a read model behind the projections' back.

Payloads are JSON-form templates with every default filled in, copied and patched per
event (as ``bench/project.py`` does): validating 10,000,000 pydantic models would
dominate the load.
"""

from __future__ import annotations

import heapq
import os
import random
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.databases import mark_ready, store_database
from consumers.lanes import catch_up_lanes
from consumers.projector import DEFAULT_PAGE
from dlc_ledger.resources import DEMO_PRICE_BOOK
from dlc_ledger.services.billing import publish_price_book
from dlc_ledger.services.quotas import apply_quota_file
from dlc_ledger.services.yaml_files import parse_price_book
from dlc_ledger.wiring.context import store_opener
from ledger.envelopes import Envelope
from ledger.events import (
    JobAdmitted,
    JobFailed,
    JobQueued,
    JobStarted,
    JobSubmitted,
    JobSucceeded,
    OccupancyEnded,
    OccupancyStarted,
    ReplicaSpec,
)
from ledger.store.engines import make_engine
from ledger.store.postgres import PostgresEventStore
from migrations.runner import upgrade
from processes.billing.rater import rate
from projections.registry import all_projections

__all__ = ["EPOCH", "EVENTS_PER_JOB", "World", "build_world", "quota_yaml", "world_for", "world_of"]

#: the cluster clock starts here; jobs spread over ``MONTHS`` months from it
EPOCH = datetime(2026, 8, 1, tzinfo=UTC)
MONTHS = 4
DEPARTMENTS = 4
LEAVES_PER_DEPARTMENT = 5
WORKSPACES_PER_LEAF = 2
#: stored events per job: its seven lifecycle and occupancy facts and the rater's three
#: transactions (GPU, CPU, memory) for its occupancy, as measured on small stores
EVENTS_PER_JOB = 10
_LIFECYCLE = 7
_SIZES = (1000, 1000, 1000, 2000, 4000, 8000)  # mGPU per job: most jobs take one GPU


@dataclass(frozen=True, slots=True)
class World:
    """What the benchmark's requests pick from."""

    jobs: int
    leaves: tuple[str, ...]
    workspaces: tuple[str, ...]
    start: datetime  # the first job's submission
    end: datetime  # the cluster clock at the end: the last event's time


def _leaf(d: int, leaf: int) -> str:
    return f"team-{d}-{leaf}"


def quota_yaml() -> str:
    """The tree as a ``quotas apply`` file: root ``org`` > ``dept-D`` > ``team-D-L``."""
    gpu_leaf = 12_000
    lines = [
        "quotas:",
        "  - name: org",
        f"    min: {{gpu/any: {gpu_leaf * DEPARTMENTS * LEAVES_PER_DEPARTMENT}, "
        "cpu: 4000000, memory: 20000000}",
    ]
    for d in range(DEPARTMENTS):
        lines += [
            f"  - name: dept-{d}",
            "    parent: org",
            f"    min: {{gpu/any: {gpu_leaf * LEAVES_PER_DEPARTMENT // 2}, cpu: 500000, "
            "memory: 2500000}",
        ]
        for leaf in range(LEAVES_PER_DEPARTMENT):
            name = _leaf(d, leaf)
            workspaces = ", ".join(f"ws-{d}-{leaf}-{w}" for w in range(WORKSPACES_PER_LEAF))
            lines += [
                f"  - name: {name}",
                f"    parent: dept-{d}",
                f"    min: {{gpu/any: {gpu_leaf // 2}, cpu: 100000, memory: 500000}}",
                "    preemption: {within_quota: LowerPriority, reclaim: Any}",
                f"    workspaces: [{workspaces}]",
            ]
    return "\n".join(lines) + "\n"


def _templates() -> dict[str, dict[str, Any]]:
    """JSON-form payloads with every default filled in, copied and patched per event."""
    models = [
        JobSubmitted(
            job_uid="u",
            name="n",
            workspace="w",
            replicas=(ReplicaSpec(mgpu=1000, cpu_milli=8000, memory_mib=16384),),
        ),
        JobQueued(job_uid="u"),
        JobAdmitted(job_uid="u"),
        JobStarted(job_uid="u"),
        OccupancyStarted(
            occupancy_id="o",
            job_uid="u",
            pod_uid="p",
            mgpu=1,
            cpu_milli=1,
            memory_mib=1,
            workspace="w",
            started_at=EPOCH,
        ),
        OccupancyEnded(occupancy_id="o", job_uid="u", pod_uid="p", ended_at=EPOCH, pod_name="p"),
        JobSucceeded(job_uid="u"),
        JobFailed(job_uid="u"),
    ]
    return {m.type_name: m.model_dump(mode="json") for m in models}


def job_events(jobs: int, seed: int = 7) -> Iterator[Envelope]:
    """Every job's facts in cluster-time order (``_LIFECYCLE`` per job; the jobs still
    running at the end have no end yet)."""
    templates = _templates()
    rng = random.Random(seed)
    workspaces = _workspaces()
    span = _span()
    gap = span / max(jobs, 1)  # between submissions
    serial = 0
    ends: list[tuple[datetime, int, str, str, bool]] = []  # (end, job, uid, pod, failed)

    def envelope(kind: str, stream: str, when: datetime, **data: Any) -> Envelope:
        nonlocal serial
        serial += 1
        return Envelope.model_construct(
            event_id=uuid.UUID(int=(1 << 100) + serial),
            type=kind,
            schema_version=1,
            stream=stream,
            occurred_at=when,
            observed_at=when,
            source="kube-watcher/bench",
            causation_id=None,
            correlation_id=None,
            data={**templates[kind], **data},
        )

    def finish(end: datetime, job: int, uid: str, pod: str, failed: bool) -> Iterator[Envelope]:
        stream = f"job/{uid}"
        yield envelope(
            "OccupancyEnded",
            stream,
            end,
            occupancy_id=pod,
            job_uid=uid,
            pod_uid=pod,
            pod_name=pod,
            ended_at=end.isoformat(),
            reason="failed" if failed else "completed",
        )
        kind = "JobFailed" if failed else "JobSucceeded"
        yield envelope(kind, stream, end, job_uid=uid, by="kube-watcher")

    for job in range(jobs):
        submitted = EPOCH + job * gap
        while ends and ends[0][0] <= submitted:
            yield from finish(*heapq.heappop(ends))
        uid = f"job-{job:08d}"
        stream = f"job/{uid}"
        workspace = workspaces[job % len(workspaces)]
        mgpu = _SIZES[rng.randrange(len(_SIZES))]
        cpu, memory = 8 * mgpu, 16 * mgpu
        queued_for = timedelta(seconds=rng.randrange(5, 900))
        started = submitted + queued_for
        runs = timedelta(seconds=int(rng.expovariate(1 / 5400)) + 60)  # mean 1.5 h
        pod = f"{uid}-worker-0"
        yield envelope(
            "JobSubmitted",
            stream,
            submitted,
            job_uid=uid,
            name=f"train-{job}",
            workspace=workspace,
            user=f"user-{job % 97}",
            priority=job % 3,
            replicas=[{**templates["JobSubmitted"]["replicas"][0], "mgpu": mgpu,
                       "cpu_milli": cpu, "memory_mib": memory}],
        )  # fmt: skip
        yield envelope("JobQueued", stream, submitted, job_uid=uid, by="kueue")
        yield envelope("JobAdmitted", stream, started, job_uid=uid, by="kueue")
        yield envelope("JobStarted", stream, started, job_uid=uid, by="kube-watcher")
        yield envelope(
            "OccupancyStarted",
            stream,
            started,
            occupancy_id=pod,
            job_uid=uid,
            pod_uid=pod,
            pod_name=pod,
            node=f"node-{job % 500:03d}",
            mgpu=mgpu,
            cpu_milli=cpu,
            memory_mib=memory,
            workspace=workspace,
            user=f"user-{job % 97}",
            started_at=started.isoformat(),
        )
        heapq.heappush(ends, (started + runs, job, uid, pod, job % 20 == 19))
    clock = EPOCH + span
    while ends and ends[0][0] <= clock:  # what ended by the end of the span; the rest runs
        yield from finish(*heapq.heappop(ends))


def _workspaces() -> tuple[str, ...]:
    return tuple(
        f"ws-{d}-{leaf}-{w}"
        for d in range(DEPARTMENTS)
        for leaf in range(LEAVES_PER_DEPARTMENT)
        for w in range(WORKSPACES_PER_LEAF)
    )


def _span() -> timedelta:
    end = datetime(EPOCH.year + (EPOCH.month - 1 + MONTHS) // 12,
                   (EPOCH.month - 1 + MONTHS) % 12 + 1, 1, tzinfo=UTC)  # fmt: skip
    return end - EPOCH - timedelta(days=1)  # the last day: jobs still running at the end


def world_for(jobs: int) -> World:
    leaves = tuple(
        _leaf(d, leaf) for d in range(DEPARTMENTS) for leaf in range(LEAVES_PER_DEPARTMENT)
    )
    return World(jobs, leaves, _workspaces(), EPOCH, EPOCH + _span())


def world_of(events: int) -> World:
    """The world :func:`build_world` makes for ``events`` (a kept store's, on reuse)."""
    return world_for(max(1, events // EVENTS_PER_JOB))


def build_world(url: str, events: int, *, workers: int | None = None, batch: int = 5_000) -> World:
    """Fill the (migrated, empty) database at ``url`` with about ``events`` events and
    bring every projection to the head; prints what each step took."""
    world = world_of(events)
    lanes = workers or os.cpu_count() or 1
    store = PostgresEventStore(url)
    try:
        started = time.perf_counter()
        publish_price_book(store, parse_price_book(DEMO_PRICE_BOOK.read_text()), at=EPOCH)
        apply_quota_file(store, quota_yaml(), principal="bench", at=EPOCH)
        pending: list[Envelope] = []
        for envelope in job_events(world.jobs):
            pending.append(envelope)
            if len(pending) == batch:
                store.append(pending)
                pending = []
        if pending:
            store.append(pending)
        head = store.head_position()
        print(f"  appended {head:,} events in {time.perf_counter() - started:.1f} s", flush=True)
        started = time.perf_counter()
        catch_up_lanes(store_opener(url), all_projections(), workers=lanes, page_size=DEFAULT_PAGE)
        took = time.perf_counter() - started
        print(f"  projected them in {took:.1f} s ({lanes} lanes)", flush=True)
        started = time.perf_counter()
        rated = rate(store, as_of=world.end, batch=20_000)
        catch_up_lanes(store_opener(url), all_projections(), workers=lanes, page_size=DEFAULT_PAGE)
        print(
            f"  rated ({rated}) and projected to {store.head_position():,} events in "
            f"{time.perf_counter() - started:.1f} s",
            flush=True,
        )
        # what autovacuum does on a production server (the test server runs without it):
        # the rater's upserts left ~56 dead row versions per live row of the monthly cost
        # at 10M, in 81 MB the cost report scans whole (2 MB once compacted: 55 -> 13 ms)
        started = time.perf_counter()
        with store.outside_transaction() as conn:
            conn.exec_driver_sql("VACUUM (FULL, ANALYZE) billing_cost_monthly")
            conn.exec_driver_sql("VACUUM (ANALYZE)")
        print(f"  vacuumed in {time.perf_counter() - started:.1f} s", flush=True)
    finally:
        store.close()
    return world


@contextmanager
def bench_store(events: int, *, keep: bool) -> Iterator[tuple[str, bool]]:
    """The API bench's store of about ``events`` events: with ``keep`` the kept database
    ``dlcbench_api_<events>`` (built the first time, reused after), else a scratch one built
    here. (URL, True when it was built now.)"""
    kept = f"dlcbench_api_{events}"
    with store_database(kept, keep=keep) as (url, fresh):
        if fresh:
            engine = make_engine(url)
            upgrade(engine)
            engine.dispose()
            print(f"building a store of ~{events:,} events:", flush=True)
            build_world(url, events)
            if keep:
                mark_ready(kept)
        else:
            print(f"reusing the kept store of ~{events:,} events", flush=True)
        yield url, fresh
