"""Quota projection throughput on the openb trace (Alibaba PAI GPU cluster trace v2023,
alibaba/clusterdata, CC BY 4.0) with the demo tree:
``python -m tests.projections.quotas.throughput``.

Events per job, in time order like a replay: JobSubmitted at creation, JobStarted and
OccupancyStarted at scheduling, OccupancyEnded and JobSucceeded at deletion. Prints the
event count, change points written and events/s of a catch-up (and of a rebuild).
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta

from sqlalchemy import text

from bench.databases import scratch_database
from consumers.projector import Projector
from dlc_ledger.services.yaml_files import parse_quota_tree
from kubesim.traces import load_openb
from ledger.envelopes import Envelope
from ledger.events import JobStarted, JobSucceeded
from ledger.store.engines import make_engine
from ledger.store.postgres import PostgresEventStore
from migrations.runner import upgrade
from projections.quotas.projection import QuotaProjection
from projections.quotas.reads import usage_at, usage_history
from tests.support.demo_files import DEMO_QUOTAS as DEMO
from tests.support.quotas import occ_ended, occ_started, submitted, transition, tree_events

__all__ = ["main", "openb_events"]


def openb_events() -> list[Envelope]:
    trace = load_openb()
    tree = parse_quota_tree(DEMO.read_text())
    timed: list[tuple[int, int, Envelope]] = []
    for n, inst in enumerate(trace.instances):
        uid, ws = inst.job_name, inst.workspace
        mode = "idle" if inst.billing_mode == "idle" else "public"
        mgpu, cpu, memory = inst.gpu_milli, inst.cpu_milli, inst.memory_mib
        when = trace.epoch + timedelta(seconds=inst.created)
        job = submitted(uid, ws, when, mode=mode, mgpu=mgpu, cpu=cpu, memory=memory)
        timed.append((inst.created, n, job))
        if inst.scheduled is None:
            continue
        start = trace.epoch + timedelta(seconds=inst.scheduled)
        timed.append((inst.scheduled, n, transition(JobStarted, uid, start)))
        pod = occ_started(uid, uid, ws, start, mode=mode, mgpu=mgpu, cpu=cpu, memory=memory)
        timed.append((inst.scheduled, n, pod))
        if inst.deleted is not None:
            end = trace.epoch + timedelta(seconds=inst.deleted)
            timed.append((inst.deleted, n, occ_ended(uid, uid, end)))
            timed.append((inst.deleted, n, transition(JobSucceeded, uid, end)))
    timed.sort(key=lambda t: (t[0], t[1]))
    return [*tree_events(tree, trace.epoch), *(e for _, _, e in timed)]


def main(argv: list[str]) -> int:
    page = int(argv[0]) if argv else 2000
    events = openb_events()
    # --at queries: the middle (the most changes to sum either way), and late in the trace
    # (read back from the running totals), as dashboards mostly ask
    instants = {
        "middle": events[len(events) // 2].occurred_at,
        "90%": events[len(events) * 9 // 10].occurred_at,
    }
    with scratch_database() as url:
        engine = make_engine(url)
        upgrade(engine)
        store = PostgresEventStore(engine)
        for i in range(0, len(events), 5000):
            store.append(events[i : i + 5000])
        projection = QuotaProjection()
        for label in ("catch-up", "rebuild"):
            started = time.perf_counter()
            projector = Projector(store, [projection], page_size=page)
            if label == "rebuild":
                projector.rebuild(projection)
            else:
                projector.catch_up()
            elapsed = time.perf_counter() - started
            with engine.connect() as conn:
                rows = conn.execute(text("SELECT count(*) FROM quota_changes")).scalar()
                queries = []
                for name, instant in instants.items():
                    query = time.perf_counter()
                    usage_at(conn, instant)
                    queries.append(f"{name} {(time.perf_counter() - query) * 1000:.0f} ms")
                sweep = time.perf_counter()
                points = len(usage_history(conn, flavor="gpu/any"))
                sweep = time.perf_counter() - sweep
            print(
                f"{label}: {len(events):,} events, {rows:,} change rows in {elapsed:.2f} s "
                f"({len(events) / elapsed:,.0f} events/s, page {page}); "
                f"--at query {', '.join(queries)}; gpu/any history of the whole trace "
                f"({points:,} change points) {sweep * 1000:.0f} ms",
                flush=True,
            )
        store.close()
        engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
