"""The read API's latency under the dashboard's load (``python -m bench api``).

At ``--events`` stored events (default 10,000,000; :mod:`bench.api_world` builds the
store through the production paths), the API runs as ``dlc-ledger api serve`` does: a
real uvicorn, ``--workers`` processes (default: the CPU count, as ``api serve``), on a
free port, with its access log. ``--clients`` threads (default 20), each with its own
keep-alive connection, send ``--requests`` of each dashboard call, one call after the other:

- ``cost``: month x workspace cost over the whole history (``/v1/cost?group_by=
  workspace,month``, :func:`projections.billing.reports.cost_report`);
- ``tree``: the quota tree with usage now (``/v1/quotas/tree``,
  :func:`projections.quotas.nodes.quota_nodes_at`);
- ``job``: one job, random, with its timeline (``/v1/jobs/{uid}``,
  :func:`projections.jobs.find_job` + ``job_detail``);
- ``series``: one leaf quota's usage over the last 30 days, hourly
  (``/v1/quotas/{quota}/series``, :func:`projections.quotas.reads.usage_series`).

A paged route is read to its last page (``limit=1000``; a series ``limit=10000``, as the
dashboard asks, so its 2,163 rows here come in one request: each page recomputes it).

A measurement stops starting requests after ``--budget`` seconds (a slow call's
figures then rest on fewer samples, printed beside them). The baseline, in the same
run: the same read functions called straight, by the same number of threads on a
connection pool of that size, and by one thread. A route the API does not serve (yet)
is reported as missing, its direct figures still measured. p50/p99 per call,
requests/s, and the HTTP layer's overhead (its p50 and p99 over the direct calls' at
the same concurrency) beside the goals: p99 < 100 ms, overhead < 30%.
The last line is JSON.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlencode

from sqlalchemy import Engine, text

from bench.api_world import World, bench_store, world_of
from consumers.projector import Projector
from dlc_ledger.services.access import create_token
from ledger.store.engines import make_engine
from ledger.store.postgres import PostgresEventStore, PostgresUnitOfWork
from migrations.runner import upgrade
from projections.billing import ReportWindow, cost_report
from projections.jobs import find_job, job_detail
from projections.quotas import quota_nodes_at, series_points, usage_series
from projections.registry import all_projections

__all__ = ["main"]

GOAL_P99_MS = 100.0
GOAL_OVERHEAD = 0.30
CALLS = ("cost", "tree", "job", "series")
#: the routes each call needs in the OpenAPI document
ROUTES = {
    "cost": "/v1/cost",
    "tree": "/v1/quotas/tree",
    "job": "/v1/jobs/{uid}",
    "series": "/v1/quotas/{quota}/series",
}
SERIES_DAYS = 30
SERIES_STEP = "hour"
#: page size asked of a paged route (its maximum); a call reads every page
PAGE = 1000
SERIES_PAGE = 10_000  # as the dashboard asks: a series in one page (each page recomputes it)


@dataclass(frozen=True, slots=True)
class Figures:
    """Latencies of one call at one concurrency."""

    p50_ms: float
    p99_ms: float
    per_s: float
    samples: int

    def as_json(self) -> dict[str, float]:
        return {
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "per_s": self.per_s,
            "samples": self.samples,
        }

    def __str__(self) -> str:
        return (
            f"p50 {self.p50_ms:8.2f} ms  p99 {self.p99_ms:8.2f} ms  {self.per_s:7,.1f}/s"
            f"  ({self.samples} calls)"
        )


def _percentile(sorted_ms: list[float], q: float) -> float:
    """Nearest-rank percentile (the p99 of 400 samples is the 396th)."""
    rank = max(1, min(len(sorted_ms), round(q * len(sorted_ms) + 0.4999)))
    return sorted_ms[rank - 1]


def _measure(
    request: Callable[[int, random.Random], None], count: int, threads: int, budget: float
) -> Figures:
    """``count`` calls of ``request(thread, rng)`` spread over ``threads`` threads, or
    as many as start within ``budget`` seconds (a slow call's figures then rest on
    fewer samples: ``samples``)."""
    latencies: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)
    deadline = time.perf_counter() + budget

    def worker(thread: int) -> None:
        rng = random.Random(thread)
        mine = count // threads + (1 if thread < count % threads else 0)
        own: list[float] = []
        start.wait()
        for _ in range(mine):
            if own and time.perf_counter() > deadline:
                break
            began = time.perf_counter()
            request(thread, rng)
            own.append((time.perf_counter() - began) * 1000)
        with lock:
            latencies.extend(own)

    began = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for future in [pool.submit(worker, t) for t in range(threads)]:
            future.result()
    wall = time.perf_counter() - began
    latencies.sort()
    return Figures(
        round(statistics.median(latencies), 2),
        round(_percentile(latencies, 0.99), 2),
        round(len(latencies) / wall, 1),
        len(latencies),
    )


@dataclass(frozen=True, slots=True)
class Inputs:
    """What the calls ask for, picked from the world."""

    world: World
    uids: list[str]
    month_start: datetime  # the cost window: every whole month of the history
    month_end: datetime
    series_from: datetime
    series_to: datetime

    @classmethod
    def of(cls, world: World, samples: int = 10_000) -> Inputs:
        rng = random.Random(11)
        uids = [f"job-{rng.randrange(world.jobs):08d}" for _ in range(min(samples, world.jobs))]
        month_end = world.end.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        month_end = (month_end + timedelta(days=32)).replace(day=1)
        return cls(
            world, uids, world.start, month_end, world.end - timedelta(days=SERIES_DAYS), world.end
        )


def _direct(engine: Engine, inputs: Inputs) -> dict[str, Callable[[int, random.Random], Any]]:
    """Each call straight through its read function(s), on a pooled connection."""
    window = ReportWindow(start=inputs.month_start, end=inputs.month_end)

    def cost(_: int, rng: random.Random) -> Any:
        with engine.connect() as conn:
            return cost_report(conn, ("workspace", "month"), window)

    def tree(_: int, rng: random.Random) -> Any:
        with engine.connect() as conn:
            return quota_nodes_at(conn)

    def job(_: int, rng: random.Random) -> Any:
        with engine.connect() as conn:
            uow = PostgresUnitOfWork(conn, read_only=True)
            return job_detail(uow, find_job(conn, rng.choice(inputs.uids)))

    def series(_: int, rng: random.Random) -> Any:
        with engine.connect() as conn:
            points = series_points(conn, SERIES_STEP, inputs.series_from, inputs.series_to)
            quota = rng.choice(inputs.world.leaves)
            return usage_series(conn, points, SERIES_STEP, quota=quota)

    return {"cost": cost, "tree": tree, "job": job, "series": series}


def _paths(inputs: Inputs) -> dict[str, Callable[[random.Random], str]]:
    """Each call's request path (the dashboard's query)."""

    def iso(t: datetime) -> str:
        return t.astimezone(UTC).isoformat().replace("+00:00", "Z")

    cost = "/v1/cost?" + urlencode(
        {"group_by": "workspace,month", "from": iso(inputs.month_start),
         "to": iso(inputs.month_end), "limit": PAGE}
    )  # fmt: skip
    window = urlencode(
        {
            "from": iso(inputs.series_from),
            "to": iso(inputs.series_to),
            "step": SERIES_STEP,
            "limit": SERIES_PAGE,
        }
    )
    tree = f"/v1/quotas/tree?limit={PAGE}"

    def series(rng: random.Random) -> str:
        return f"/v1/quotas/{quote(rng.choice(inputs.world.leaves))}/series?{window}"

    return {
        "cost": lambda rng: cost,
        "tree": lambda rng: tree,
        "job": lambda rng: f"/v1/jobs/{quote(rng.choice(inputs.uids))}",
        "series": series,
    }


class _Server:
    """``dlc-ledger api serve --workers N`` on a free port, in processes of its own."""

    def __init__(self, url: str, workers: int) -> None:
        with socket.socket() as probe:  # a free port: bound, read back, released
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        env = {**os.environ, "DATABASE_URL": url}
        # its access log (a line per request, as in production) is written to /dev/null
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "dlc_ledger", "api", "serve"),
                *("--port", str(self.port), "--workers", str(workers)),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the API server did not start") from None
                time.sleep(0.2)

    def cpu_seconds(self) -> float:
        """CPU seconds the server's processes (uvicorn's supervisor and its workers) have
        used so far (Linux ``/proc``; 0 elsewhere)."""
        return sum(_cpu_seconds(pid) for pid in _process_tree(self.process.pid))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux ``/proc``)."""
    out, pending = [], [pid]
    while pending:
        current = pending.pop()
        out.append(current)
        try:
            with open(f"/proc/{current}/task/{current}/children") as f:
                pending.extend(int(child) for child in f.read().split())
        except OSError:
            continue
    return out


def _cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(map(int, fields[11:13])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _http(
    port: int, tokens: list[str], paths: dict[str, Callable[[random.Random], str]], threads: int
) -> tuple[dict[str, Callable[[int, random.Random], Any]], Callable[[], None]]:
    """Each call as a GET on the thread's own keep-alive connection, with the thread's own
    token (a client each: the API limits the rate per token); and a closer."""
    connections = [http.client.HTTPConnection("127.0.0.1", port) for _ in range(threads)]
    headers_of = [
        {"Authorization": f"Bearer {tokens[t]}", "Accept": "application/json"}
        for t in range(threads)
    ]

    def call(name: str) -> Callable[[int, random.Random], Any]:
        path_of = paths[name]

        def request(thread: int, rng: random.Random) -> Any:
            conn = connections[thread]
            path = path_of(rng)
            items: list[Any] = []
            page = path
            while True:  # every page: a chart needs the whole series
                body, response = _get(conn, page, headers_of[thread])
                if response.status != 200:
                    raise RuntimeError(f"GET {page}: {response.status} {body[:300]!r}")
                document = json.loads(body)
                if not isinstance(document, dict) or "next_cursor" not in document:
                    return document  # not a paged list (a job, a report)
                items += document["items"]
                cursor = document["next_cursor"]
                if not cursor:
                    return items
                page = f"{path}&cursor={quote(cursor)}"

        return request

    def close() -> None:
        for conn in connections:
            conn.close()

    return {name: call(name) for name in paths}, close


def _get(
    conn: http.client.HTTPConnection, path: str, headers: dict[str, str]
) -> tuple[bytes, http.client.HTTPResponse]:
    """GET ``path`` on ``conn``; once more on a new connection if the server had closed
    it (uvicorn drops a keep-alive connection idle for 5 s: a client whose neighbours'
    slow calls kept it waiting), as a browser does."""
    for attempt in (1, 2):
        try:
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            return response.read(), response
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            conn.close()
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _served_routes(port: int) -> set[str]:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    conn.request("GET", "/openapi.json")
    paths = set(json.loads(conn.getresponse().read())["paths"])
    conn.close()
    return paths


def _overhead(http_ms: float, direct_ms: float) -> float:
    return round((http_ms - direct_ms) / direct_ms, 3)


def _bench(url: str, world: World, args: argparse.Namespace) -> dict[str, Any]:
    inputs = Inputs.of(world)
    engine = make_engine(url, pool_size=args.clients, max_overflow=0)
    with engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    store = PostgresEventStore(engine)
    tokens = [
        create_token(store, ["admin"], name=f"bench-{n}", created_by="bench").secret
        for n in range(args.clients)
    ]
    direct = _direct(engine, inputs)
    results: dict[str, Any] = {}
    server = _Server(url, args.workers)
    print(
        f"API: uvicorn, {args.workers} worker process(es), port {server.port}; "
        f"{args.clients} clients",
        flush=True,
    )
    try:
        served = _served_routes(server.port)
        missing = [c for c in CALLS if ROUTES[c] not in served]
        paths = _paths(inputs)
        for name in CALLS:
            # fresh connections per call: the server drops one idle for 5 s (uvicorn's
            # keep-alive timeout) while the direct calls are measured
            calls, close = _http(server.port, tokens, paths, args.clients)
            warm = random.Random(0)
            for _ in range(3):
                direct[name](0, warm)
            row: dict[str, Any] = {"route": ROUTES[name]}
            if name in missing:
                row["http"] = None
                print(f"{name:7s} HTTP      route {ROUTES[name]} not served (missing)", flush=True)
            else:
                for _ in range(3):
                    calls[name](0, warm)
                cpu = server.cpu_seconds()
                figures = _measure(calls[name], args.requests, args.clients, args.budget)
                cpu_ms = (server.cpu_seconds() - cpu) * 1000 / figures.samples
                row["http"] = figures.as_json()
                row["server_cpu_ms_per_call"] = round(cpu_ms, 2)
                print(
                    f"{name:7s} HTTP{args.clients:<5d} {figures}; server CPU {cpu_ms:.1f} ms/call",
                    flush=True,
                )
                alone = _measure(calls[name], max(args.requests // 4, 1), 1, args.budget)
                row["http_1"] = alone.as_json()
                print(f"{name:7s} HTTP1     {alone}", flush=True)
            cpu = time.process_time()  # this process: the read functions (and the threads)
            pooled = _measure(direct[name], args.requests, args.clients, args.budget)
            cpu_ms = (time.process_time() - cpu) * 1000 / pooled.samples
            single = _measure(direct[name], max(args.requests // 4, 1), 1, args.budget)
            row["direct"] = pooled.as_json()
            row["direct_1"] = single.as_json()
            row["direct_cpu_ms_per_call"] = round(cpu_ms, 2)
            print(
                f"{name:7s} direct{args.clients:<3d} {pooled}; Python CPU {cpu_ms:.1f} ms/call",
                flush=True,
            )
            print(f"{name:7s} direct1   {single}", flush=True)
            if row["http"] is not None:
                row["overhead_p50"] = _overhead(row["http"]["p50_ms"], pooled.p50_ms)
                row["overhead_p99"] = _overhead(row["http"]["p99_ms"], pooled.p99_ms)
                row["overhead_p50_1"] = _overhead(row["http_1"]["p50_ms"], single.p50_ms)
                row["p99_met"] = row["http"]["p99_ms"] < GOAL_P99_MS
                row["overhead_met"] = row["overhead_p50"] < GOAL_OVERHEAD
                print(
                    f"{name:7s} HTTP overhead p50 {row['overhead_p50']:+.0%}, p99 "
                    f"{row['overhead_p99']:+.0%}, one client p50 {row['overhead_p50_1']:+.0%} "
                    f"(goal < {GOAL_OVERHEAD:.0%}); p99 "
                    f"{row['http']['p99_ms']:.1f} ms (goal < {GOAL_P99_MS:.0f} ms): "
                    f"{'met' if row['p99_met'] else 'missed'} / "
                    f"{'met' if row['overhead_met'] else 'missed'}",
                    flush=True,
                )
            results[name] = row
            close()
    finally:
        server.stop()
        engine.dispose()
    return results


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench api")
    parser.add_argument("--events", type=int, default=10_000_000, help="stored events")
    parser.add_argument("--clients", type=int, default=20, help="concurrent clients")
    parser.add_argument("--requests", type=int, default=400, help="requests per call")
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="API worker processes (default: the CPU count, as api serve)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=45.0,
        help="seconds per measurement: a slow call stops starting requests after it",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the built store in a database named for --events and reuse it next time",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with bench_store(args.events, keep=args.keep) as (url, fresh):
        if not fresh:
            engine = make_engine(url)
            upgrade(engine)  # a kept store takes this branch's migrations too
            # and their read models: a new one fills at the projector's next catch-up
            Projector(PostgresEventStore(engine), all_projections()).catch_up()
            engine.dispose()
        world = world_of(args.events)
        with make_engine(url).connect() as conn:
            stored = conn.execute(text("SELECT max(position) FROM events")).scalar() or 0
        print(f"store ready: {stored:,} events ({time.perf_counter() - started:.0f} s)", flush=True)
        results = _bench(url, world, args)
    print(
        json.dumps(
            {
                "events": stored,
                "jobs": world.jobs,
                "clients": args.clients,
                "requests": args.requests,
                "server": f"uvicorn, {args.workers} worker(s)",
                "goals": {"p99_ms": GOAL_P99_MS, "http_overhead": GOAL_OVERHEAD},
                "calls": results,
            }
        )
    )
    return 0
