"""Projection throughput: every registered projection built from position 0, against the
``eventsourcing`` library's follower (a ProcessApplication with a tracking record per event)
on the same PostgreSQL server, in one run.

Events are shaped like a replay: per job JobSubmitted, JobStarted, OccupancyStarted,
OccupancyEnded, JobSucceeded, with about ``--window`` jobs running at once (so a pod's end
lands pages after its start and the projections must load state back), plus nodes.
The baseline runs on fewer events (``--baseline-events``) and is reported as a rate.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.engine import make_url

from bench.databases import scratch_database
from consumers.lanes import catch_up_lanes
from consumers.projector import DEFAULT_PAGE, Projector
from dlc_ledger.wiring.context import store_opener
from ledger.envelopes import Envelope
from ledger.events import (
    JobStarted,
    JobSubmitted,
    JobSucceeded,
    NodeRegistered,
    OccupancyEnded,
    OccupancyStarted,
    ReplicaSpec,
)
from ledger.store.base import RecordedEvent, UnitOfWork
from ledger.store.engines import make_engine
from ledger.store.postgres import PostgresEventStore
from migrations.runner import upgrade
from projections.base import Projection
from projections.registry import all_projections

__all__ = ["main", "replay_events"]

EPOCH = datetime(2026, 11, 1, tzinfo=UTC)
WORKSPACES = ("ws-ls", "ws-be", "ws-burstable", "ws-guaranteed")
NODES = 2_000


def _templates() -> dict[str, dict[str, Any]]:
    """JSON-form payloads with every default filled in, copied and patched per event."""
    models = [
        NodeRegistered(node="n", pool="p", gpus=8, cpu_milli=96_000, memory_mib=786_432),
        JobSubmitted(
            job_uid="u",
            name="n",
            workspace="w",
            replicas=(ReplicaSpec(mgpu=1000, cpu_milli=8000, memory_mib=16384),),
        ),
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
        OccupancyEnded(occupancy_id="o", job_uid="u", pod_uid="p", ended_at=EPOCH),
        JobSucceeded(job_uid="u"),
    ]
    return {m.type_name: m.model_dump(mode="json") for m in models}


def replay_events(count: int, *, window: int = 2_000) -> Iterator[Envelope]:
    """``count`` events: NODES node registrations, then jobs in a sliding window."""
    templates = _templates()
    made = 0
    serial = 0

    def envelope(kind: str, stream: str, when: datetime, **data: Any) -> Envelope:
        nonlocal serial
        serial += 1
        return Envelope.model_construct(
            event_id=uuid.UUID(int=serial),
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

    for i in range(min(NODES, count)):
        yield envelope("NodeRegistered", f"node/n{i}", EPOCH, node=f"n{i}", pool=f"pool-{i % 4}")
        made += 1
    job = 0
    while made < count:
        uid = f"job-{job}"
        stream = f"job/{uid}"
        start = EPOCH + timedelta(seconds=job)
        workspace = WORKSPACES[job % len(WORKSPACES)]
        for event in (
            envelope(
                "JobSubmitted",
                stream,
                start,
                job_uid=uid,
                name=f"train-{job}",
                workspace=workspace,
                user=f"user-{job % 50}",
            ),
            envelope("JobStarted", stream, start, job_uid=uid),
            envelope(
                "OccupancyStarted",
                stream,
                start,
                occupancy_id=f"{uid}-0",
                job_uid=uid,
                pod_uid=f"{uid}-0",
                pod_name=f"{uid}-worker-0",
                node=f"n{job % NODES}",
                mgpu=1000,
                cpu_milli=8000,
                memory_mib=16384,
                workspace=workspace,
                started_at=start.isoformat(),
            ),
        ):
            if made < count:
                yield event
                made += 1
        done = job - window
        if done >= 0:
            uid = f"job-{done}"
            end = EPOCH + timedelta(seconds=job, milliseconds=500)
            for event in (
                envelope(
                    "OccupancyEnded",
                    f"job/{uid}",
                    end,
                    occupancy_id=f"{uid}-0",
                    job_uid=uid,
                    pod_uid=f"{uid}-0",
                    ended_at=end.isoformat(),
                ),
                envelope("JobSucceeded", f"job/{uid}", end, job_uid=uid),
            ):
                if made < count:
                    yield event
                    made += 1
        job += 1


def _fill(store: PostgresEventStore, count: int, window: int, batch: int = 5_000) -> float:
    started = time.perf_counter()
    pending: list[Envelope] = []
    for envelope in replay_events(count, window=window):
        pending.append(envelope)
        if len(pending) == batch:
            store.append(pending)
            pending = []
    if pending:
        store.append(pending)
    return time.perf_counter() - started


def _baseline(url: str, count: int, window: int) -> float:
    """Events per second through an eventsourcing ProcessApplication following an upstream."""
    parsed = make_url(url)
    os.environ.update(
        {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": parsed.database or "",
            "POSTGRES_HOST": parsed.host or "127.0.0.1",
            "POSTGRES_PORT": str(parsed.port or 5432),
            "POSTGRES_USER": parsed.username or "",
            "POSTGRES_PASSWORD": parsed.password or "",
            "CREATE_TABLE": "y",
        }
    )
    from eventsourcing.application import Application
    from eventsourcing.domain import Aggregate, event
    from eventsourcing.system import ProcessApplication

    class Job(Aggregate):
        @event("Submitted")
        def __init__(self, name: str, workspace: str) -> None:
            self.name, self.workspace, self.status = name, workspace, "Creating"

        @event("Started")
        def start(self) -> None:
            self.status = "Running"

        @event("OccupancyStarted")
        def occupy(self, mgpu: int, cpu_milli: int, memory_mib: int, started_at: str) -> None:
            self.occupied = (mgpu, cpu_milli, memory_mib, started_at)

        @event("OccupancyEnded")
        def release(self, ended_at: str) -> None:
            self.released = ended_at

        @event("Succeeded")
        def succeed(self) -> None:
            self.status = "Succeeded"

    class Cluster(Application[uuid.UUID]):
        log_section_size = 500

    class JobStates(ProcessApplication[uuid.UUID]):
        """Trivial work per event: fold it into an in-memory status count."""

        pull_section_size = 500

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.seen: Counter[str] = Counter()

        def policy(self, domain_event: Any, processing_event: Any) -> None:
            self.seen[type(domain_event).__name__] += 1

    upstream = Cluster()
    running: dict[int, Job] = {}
    touched: list[Job] = []
    for n in range(count // 5):
        job = Job(name=f"train-{n}", workspace=WORKSPACES[n % 4])
        job.start()
        job.occupy(1000, 8000, 16384, (EPOCH + timedelta(seconds=n)).isoformat())
        running[n] = job
        touched.append(job)
        done = running.pop(n - window, None)
        if done is not None:
            done.release(EPOCH.isoformat())
            done.succeed()
            touched.append(done)
        if len(touched) >= 200:
            upstream.save(*touched)
            touched = []
    for job in running.values():
        job.release(EPOCH.isoformat())
        job.succeed()
        touched.append(job)
    upstream.save(*touched)

    follower = JobStates()
    follower.follow(upstream.name, upstream.notification_log)
    total = upstream.recorder.max_notification_id() or 0
    started = time.perf_counter()
    follower.pull_and_process(upstream.name)
    elapsed = time.perf_counter() - started
    processed = sum(follower.seen.values())
    if processed != total:
        raise RuntimeError(f"baseline processed {processed} of {total} events")
    print(f"eventsourcing follower: {processed:,} events in {elapsed:.1f} s", flush=True)
    return processed / elapsed


class _ReadOnly(Projection):
    """Reads every event and applies nothing: the cost of reading, for ``--each``."""

    name = "reading"

    def apply(self, uow: UnitOfWork, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        pass


def _server_cpu() -> float:
    """CPU seconds used so far by this machine's PostgreSQL processes, those that have
    exited included (Linux ``/proc``; 0 elsewhere).

    A backend that exits (a lane's connection) leaves its CPU in the postmaster's
    children's times once reaped, so those count too. The server runs locally in the
    bench; other databases' work counts as well.
    """
    ticks = 0
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"postgres" not in f.read():
                    continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        ticks += sum(map(int, fields[11:15]))  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def _children_cpu() -> float:
    """CPU seconds of this process's children that have been waited for (the lanes)."""
    times = os.times()
    return times.children_user + times.children_system


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench project")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--baseline-events", type=int, default=10_000)
    parser.add_argument(
        "--page-size", type=int, default=DEFAULT_PAGE, help="default: the projector's, %(default)s"
    )
    parser.add_argument("--window", type=int, default=2_000, help="jobs running at once")
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="lanes for the headline run (dlc-ledger project --workers)",
    )
    parser.add_argument(
        "--each",
        action="store_true",
        help="also time each projection alone, with its CPU (and that of reading alone)",
    )
    args = parser.parse_args(argv)

    with scratch_database() as url:
        engine = make_engine(url)
        upgrade(engine)
        store = PostgresEventStore(engine)
        filled = _fill(store, args.events, args.window)
        print(f"stored {args.events:,} events in {filled:.1f} s", flush=True)
        # the headline: all projections together, as `dlc-ledger project --workers N` builds
        # them (lane processes included: their start-up is part of the time)
        started, lanes, server = time.perf_counter(), _children_cpu(), _server_cpu()
        catch_up_lanes(
            store_opener(url), all_projections(), workers=args.workers, page_size=args.page_size
        )
        total = time.perf_counter() - started
        lanes, server = _children_cpu() - lanes, _server_cpu() - server
        rate = args.events / total
        print(
            f"all projections together, {args.workers} lane(s): {args.events:,} events in "
            f"{total:.1f} s ({rate:,.0f} events/s); CPU {lanes + server:.1f} s ({lanes:.1f} s "
            f"in the lanes, {server:.1f} s PostgreSQL)",
            flush=True,
        )
        single: float | None = None
        if args.workers > 1:
            # the same in one process, for comparison
            projector = Projector(store, all_projections(), page_size=args.page_size)
            for projection in projector.projections:
                projector.reset(projection)
            started = time.perf_counter()
            projector.catch_up()
            single = args.events / (time.perf_counter() - started)
            print(f"all projections together, one process: {single:,.0f} events/s", flush=True)
        if args.each:
            # diagnosis: each projection rebuilt alone (each reads its events again), with
            # the CPU it cost here and in PostgreSQL; "reading" applies nothing, so a
            # projection's cost beyond reading (its Projection.cost) is the difference
            for projection in [_ReadOnly(), *all_projections()]:
                runner = Projector(store, [projection], page_size=args.page_size)
                runner.reset(projection)
                started, client, server = time.perf_counter(), time.process_time(), _server_cpu()
                runner.catch_up()
                elapsed = time.perf_counter() - started
                client, server = time.process_time() - client, _server_cpu() - server
                print(
                    f"projection {projection.name} alone: {args.events / elapsed:,.0f} "
                    f"events/s; CPU {client + server:.2f} s ({client:.2f} s here, "
                    f"{server:.2f} s PostgreSQL)",
                    flush=True,
                )
        store.close()
        engine.dispose()

    with scratch_database() as url:
        baseline = _baseline(url, args.baseline_events, min(args.window, 200))

    print(
        json.dumps(
            {
                "projection_events_per_s": round(rate),
                "eventsourcing_follower_events_per_s": round(baseline),
                "projection_vs_eventsourcing_ratio": round(rate / baseline, 2),
                "lanes": args.workers,
                "one_process_events_per_s": round(single) if single is not None else round(rate),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
