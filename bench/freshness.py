"""Event-to-billable latency under a live replay (``python -m bench freshness``).

The whole pipeline runs as ``dlc-ledger up`` runs it (kubesim replaying the openb trace at
``--speed`` cluster seconds per wall second, the watcher, Tansu, ingest, the projector,
billing ticks every ``--billing-interval`` seconds, no dispatcher: open loop) on a scratch
database. For every pod that starts, the latency is from its start becoming a stored fact
(the ``OccupancyStarted`` event's ``recorded_at``, the wall clock of ingest's commit) to the
moment its cost is visible, polled every ``--poll`` seconds (the poll adds up to that much),
two ways:

- **rated**: the occupancy in ``billing_occupancies``, what ``report cost --source rated``
  (and ``auto`` for a day grouping or a window off month boundaries) rates to the cluster
  clock when it is read: its cost to date, from the price book, as soon as the billing
  projection has the fact;
- **posted**: its first rating transaction in ``billing_transactions`` — what the ledger
  source of ``report cost`` and ``GET /v1/cost`` sum (projected in the same transaction as
  the monthly cost table) — which the rater posts at the accrual step (an hour) after the
  start, on the billing clock.

In a replay the watcher stamps ``observed_at`` with the simulated cluster clock, so the
watcher -> Kafka -> ingest leg before the store is not in these figures (ingest's own lag:
``dlc_ingest_*`` metrics, docs/metrics.md).

Speeds are cluster seconds per wall second: 36,000 (ten hours of the openb trace per
second: the trace is sparse, 8,152 pods over 149 days, and sparser still in its first
weeks, so ``up``'s default 3,600 rates a pod a minute or less) and ten times it. Each
speed runs ``--seconds`` of wall time; pods stored in the last ``--billing-interval`` plus
5 s are left out (they may not have had their tick yet).
Goal: p99 < 2 s (Lago's published event-to-billable figure). The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bench.databases import scratch_database
from ledger.store.engines import make_engine
from migrations.runner import upgrade

__all__ = ["main"]

GOAL_P99_S = 2.0

_RATED = text(
    "SELECT start_position, occupancy_id, start_recorded_at FROM billing_occupancies "
    "WHERE start_position > :after ORDER BY start_position"
)
_NEW = text(
    "SELECT t.position, t.occupancy_id, e.recorded_at FROM billing_transactions t "
    "JOIN billing_occupancies o ON o.occupancy_id = t.occupancy_id "
    "JOIN events e ON e.event_id = o.start_event_id "
    "WHERE t.position > :after AND t.occupancy_id IS NOT NULL ORDER BY t.position"
)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _run(url: str, speed: str, args: argparse.Namespace) -> dict[str, Any]:
    engine = make_engine(url)
    upgrade(engine)
    with tempfile.TemporaryDirectory(prefix="dlc-bench-freshness-") as data_dir:
        env = {**os.environ, "DATABASE_URL": url, "DLC_DATA_DIR": data_dir}
        env.pop("KAFKA_BOOTSTRAP", None)  # up starts an embedded broker of its own
        argv = [
            *(sys.executable, "-m", "dlc_ledger", "up", "--port", "0", "--no-dispatch"),
            *("--trace", "openb", "--speed", speed),
            *("--billing-interval", str(args.billing_interval)),
        ]
        log = Path(data_dir) / "up.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            seen: dict[str, tuple[datetime, float]] = {}  # pod -> (stored, latency)
            rated: dict[str, tuple[datetime, float]] = {}
            after = rated_after = 0
            started = time.monotonic()
            while time.monotonic() - started < args.seconds:
                if proc.poll() is not None:
                    raise SystemExit(f"up exited: {log.read_text()[-2000:]}")
                with engine.connect() as conn:
                    rows = conn.execute(_NEW, {"after": after}).all()
                    visible = conn.execute(_RATED, {"after": rated_after}).all()
                now = datetime.now(UTC)
                for position, pod, stored in rows:
                    after = max(after, position)
                    if pod not in seen:  # its first rating transaction
                        seen[pod] = (stored, (now - stored).total_seconds())
                for position, pod, stored in visible:
                    rated_after = max(rated_after, position)
                    rated.setdefault(pod, (stored, (now - stored).total_seconds()))
                time.sleep(args.poll)
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    engine.dispose()
    cutoff = datetime.now(UTC).timestamp() - args.billing_interval - 5
    return {
        "speed": speed,
        "rated": _figures([s for stored, s in rated.values() if stored.timestamp() < cutoff]),
        "posted": _figures([s for stored, s in seen.values() if stored.timestamp() < cutoff]),
    }


def _figures(latencies: list[float]) -> dict[str, Any]:
    if not latencies:
        return {"pods": 0}
    return {
        "pods": len(latencies),
        "p50_s": round(statistics.median(latencies), 3),
        "p99_s": round(_percentile(latencies, 0.99), 3),
        "max_s": round(max(latencies), 3),
        "p99_met": _percentile(latencies, 0.99) < GOAL_P99_S,
    }


def _line(what: str, row: dict[str, Any]) -> str:
    if not row["pods"]:
        return f"{what}: no pod in the window"
    return (
        f"{what}: {row['pods']} pods, p50 {row['p50_s']} s, p99 {row['p99_s']} s, "
        f"max {row['max_s']} s (goal p99 < {GOAL_P99_S:g} s: "
        f"{'met' if row['p99_met'] else 'missed'})"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench freshness")
    parser.add_argument(
        "--speeds", default="36000,360000", help="cluster seconds per wall second, comma-separated"
    )
    parser.add_argument("--seconds", type=float, default=120.0, help="wall time per speed")
    parser.add_argument("--billing-interval", type=float, default=60.0)
    parser.add_argument("--poll", type=float, default=0.1)
    args = parser.parse_args(argv)
    results = []
    for speed in args.speeds.split(","):
        with scratch_database("dlcbench_freshness") as url:
            row = _run(url, speed, args)
        results.append(row)
        print(
            f"speed {speed}x, billing every {args.billing_interval:g} s: event -> billable "
            f"{_line('rated', row['rated'])}; {_line('posted', row['posted'])}",
            flush=True,
        )
    print(
        json.dumps(
            {"billing_interval_s": args.billing_interval, "goal_p99_s": GOAL_P99_S, "runs": results}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
