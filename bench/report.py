"""Report latency on a year of synthetic history (``python -m bench report [--jobs N]``).

The rows a ~10,000,000-event history (``--jobs`` jobs, default 1,000,000, ten
events each, over one year) would leave behind, its events in the store and the
read-model rows, are generated directly inside PostgreSQL (``INSERT … SELECT generate_series``, the
in-database equivalent of COPY) rather than appended through the store and
projected, which would take the better part of an hour on this machine. The
queries timed are the real report code paths:

- ``report_month_by_workspace_ms``: :func:`projections.billing.reports.cost_report`
  grouped by workspace and flavor over one month (ledger path, pre-aggregated
  ``billing_cost_monthly``);
- ``job_timeline_ms``: one job's timeline as ``jobs show`` reads it
  (:func:`projections.jobs.timeline_rows`: the job's own stream from the store, plus
  ``job_timeline`` rows), ten events per job;
- ``invoice_lines_ms``: :func:`projections.billing.reports.invoice_lines` for one invoice.

Medians of ``--repeat`` runs; the last output line is JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import Connection, text

from bench.databases import scratch_database
from ledger.store.engines import make_engine
from ledger.store.postgres import PostgresUnitOfWork
from migrations.runner import upgrade
from projections.billing import ReportWindow, cost_report, invoice_lines
from projections.jobs import timeline_rows

WORKSPACES = 300
USERS = 3000
FLAVORS = ("gpu/A100-SXM4-80GB", "gpu/H100-80GB", "gpu/V100", "gpu/T4", "gpu/L40S", "gpu/any")
MODES = ("public", "spot", "idle", "quota")
EVENTS_PER_JOB = 10


def _generate(conn: Connection, jobs: int) -> None:
    flavors = "ARRAY[" + ", ".join(f"'{f}'" for f in FLAVORS) + "]"
    modes = "ARRAY[" + ", ".join(f"'{m}'" for m in MODES) + "]"
    # job j: workspace j % W, user j % U, flavor, mode, month spread over 2026
    job = f"""
      SELECT j, 'ws-' || (j % {WORKSPACES}) AS ws, 'user-' || (j % {USERS}) AS usr,
             ({flavors})[1 + (j / 11) % {len(FLAVORS)}] AS flavor,
             ({modes})[1 + (j / 7) % {len(MODES)}] AS mode,
             '2026-' || lpad((1 + (j * 12::bigint) / {jobs})::text, 2, '0') AS month
        FROM generate_series(0, {jobs - 1}) AS j
    """
    conn.execute(
        text(
            f"""
        INSERT INTO billing_cost_monthly
        SELECT month, ws, 'q-' || ws, usr, flavor, mode, 'USD', sum(1000 + j % 50000)
          FROM ({job}) AS jobs GROUP BY month, ws, usr, flavor, mode
        """
        )
    )
    # the jobs' own streams in the store: ``jobs show`` reads a job's timeline from them
    conn.execute(
        text(
            f"""
        INSERT INTO events (position, event_id, stream, version, type, schema_version,
                            occurred_at, observed_at, recorded_at, source, data, hash)
        SELECT j * {EVENTS_PER_JOB} + k + 1, gen_random_uuid(), 'job/job-' || j, k + 1,
               (ARRAY['JobSubmitted','JobQueued','JobAdmitted','JobStarted','OccupancyStarted',
                      'JobRestarted','JobStarted','OccupancyEnded','JobSucceeded',
                      'JobDeleted'])[k + 1],
               1, t, t, t, 'kube-watcher/bench', jsonb_build_object('job_uid', 'job-' || j),
               '\\x00'::bytea
          FROM generate_series(0, {jobs - 1}) AS j, generate_series(0, {EVENTS_PER_JOB - 1}) AS k,
               LATERAL (SELECT timestamptz '2026-01-01'
                                 + (j * 31536::bigint / {jobs}) * interval '1000 s'
                                 + k * interval '1 min' AS t) AS at
        """
        )
    )
    conn.execute(
        text(
            "INSERT INTO checkpoints (name, position, offsets, updated_at) "
            f"VALUES ('projection:jobs', {jobs * EVENTS_PER_JOB}, '{{}}', now())"
        )
    )
    conn.execute(
        text(
            f"""
        INSERT INTO billing_invoices
        SELECT 'inv-' || ws || '-' || month, ws, month, 'USD', 0, 0,
               (month || '-02')::date, 'issued', NULL, 0, 0, now()
          FROM (SELECT DISTINCT ws, month FROM ({job}) AS jobs) AS x
        """
        )
    )
    conn.execute(
        text(
            f"""
        INSERT INTO billing_invoice_lines
        SELECT 'inv-' || ws || '-' || month,
               row_number() OVER (PARTITION BY ws, month ORDER BY j, r),
               'job-' || j || ': ' || r, ws, 'job-' || j, r, mode, 1.5, 'GPU-hour',
               1000 + j % 50000, '[]'::jsonb
          FROM ({job}) AS jobs, unnest(ARRAY['gpu', 'cpu', 'memory']) AS r
        """
        )
    )
    conn.execute(text("ANALYZE"))


def _median_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm the cache and the plan
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench report")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args(argv)
    rng = random.Random(7)
    with scratch_database() as url:
        engine = make_engine(url)
        upgrade(engine)
        started = time.perf_counter()
        with engine.begin() as conn:
            _generate(conn, args.jobs)
        print(
            f"generated {args.jobs:,} jobs ({args.jobs * EVENTS_PER_JOB:,} events) "
            f"in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        window = ReportWindow(
            start=datetime(2026, 6, 1, tzinfo=UTC), end=datetime(2026, 7, 1, tzinfo=UTC)
        )
        with engine.connect() as conn:
            reads = PostgresUnitOfWork(conn)  # the store's reads on this connection
            rows = cost_report(conn, ("workspace", "flavor"), window)
            print(f"month by workspace x flavor: {len(rows)} rows", flush=True)
            month_ms = _median_ms(
                lambda: cost_report(conn, ("workspace", "flavor"), window), args.repeat
            )

            def timeline() -> object:
                return timeline_rows(reads, f"job-{rng.randrange(args.jobs)}")

            timeline_ms = _median_ms(timeline, args.repeat)
            invoice_ids = [
                r[0] for r in conn.execute(text("SELECT invoice_id FROM billing_invoices"))
            ]

            def lines() -> object:
                return invoice_lines(conn, rng.choice(invoice_ids))

            lines_ms = _median_ms(lines, args.repeat)
            per_invoice = len(invoice_lines(conn, invoice_ids[0]))
            print(f"invoice lines per invoice: ~{per_invoice}", flush=True)
        engine.dispose()
    print(
        json.dumps(
            {
                "jobs": args.jobs,
                "events": args.jobs * EVENTS_PER_JOB,
                "report_month_by_workspace_ms": month_ms,
                "job_timeline_ms": timeline_ms,
                "invoice_lines_ms": lines_ms,
            }
        )
    )
    return 0
