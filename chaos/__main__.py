"""``python -m chaos [--seed S] [--faults N] [--limit PODS] [--speed X]``.

Replays one openb slice twice, clean and under ``--faults`` seeded faults, compares the two
and prints, as JSON on its last line: faults injected / recovered, facts lost, facts
doubled, differing report rows. Exits 1 when anything is lost, doubled or differs, or a
fault was not recovered from (docs/chaos.md).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

from chaos.cluster import DEFAULT_START, openb_slice
from chaos.compare import compare, compare_deliveries
from chaos.run import run_once

__all__ = ["main"]

#: the wall seconds a replay lasts when --speed is not given
DEFAULT_REPLAY_SECONDS = 60.0


def _say(line: str) -> None:
    # one write per line: faults report from threads of their own
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    parser.add_argument("--seed", type=int, default=1, help="draws the faults and moments")
    parser.add_argument("--faults", type=int, default=50, help="faults in the chaos run")
    parser.add_argument("--limit", type=int, default=200, help="pods of openb to replay")
    parser.add_argument("--speed", type=float, default=None,
                        help="cluster seconds per wall second (default: the slice in "
                        "--seconds)")  # fmt: skip
    parser.add_argument("--seconds", type=float, default=DEFAULT_REPLAY_SECONDS,
                        help="wall seconds a replay lasts when --speed is not given")  # fmt: skip
    parser.add_argument("--start", type=int, default=DEFAULT_START,
                        help="the slice's pods are the first created at or after this "
                        "trace second")  # fmt: skip
    parser.add_argument("--closed-loop", action="store_true",
                        help="jobs arrive suspended and run when `dlc-ledger dispatch` "
                        "admits them, cluster time in lockstep with its cycles")  # fmt: skip
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep each run's directory (logs, reports) here")  # fmt: skip
    args = parser.parse_args(argv)
    chosen = openb_slice(args.limit, args.start)
    span = chosen.horizon - chosen.start
    speed = args.speed or span / args.seconds
    _say(f"openb slice: {chosen.pods} pods, trace seconds {chosen.start}..{chosen.horizon} "
         f"({span / 3600:.1f} h of cluster time) at {speed:,.0f}x: "
         f"{span / speed:.0f} s a run; seed {args.seed}, {args.faults} faults")  # fmt: skip
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="dlc-chaos-"))
    started = time.monotonic()
    try:
        clean = run_once("clean", workdir / "clean", chosen, speed, seed=args.seed, faults=0,
                         say=_say, closed_loop=args.closed_loop)  # fmt: skip
        _say(f"clean: {clean.events} events in {clean.wall_seconds:.0f} s")
        # a closed loop's pace is the pipeline's: faults are spread over the clean loop's time
        chaos = run_once("chaos", workdir / "chaos", chosen, speed, seed=args.seed,
                         faults=args.faults, say=_say, closed_loop=args.closed_loop,
                         wall_estimate=clean.replay_seconds)  # fmt: skip
        _say(f"chaos: {chaos.events} events in {chaos.wall_seconds:.0f} s; restarts "
             f"{ {k: v for k, v in chaos.restarts.items() if v} }")  # fmt: skip
    except Exception as exc:  # a run that could not finish still ends on its JSON line
        _say(traceback.format_exc())
        print(json.dumps({"seed": args.seed, "error": f"{type(exc).__name__}: {exc}"}))
        return 1
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    result = compare(clean.facts, chaos.facts, clean.reports, chaos.reports)
    notified = compare_deliveries(clean.deliveries, chaos.deliveries)
    for line in result.examples[:20]:
        _say(f"  {line}")
    injected = [
        f for f in chaos.faults if f.injected_at is not None and not f.failed.startswith("not")
    ]
    recovered = [f for f in chaos.faults if f.recovered_after is not None]
    summary = {
        "seed": args.seed,
        "pods": chosen.pods,
        "closed_loop": args.closed_loop,
        "cycles": [clean.cycles, chaos.cycles],
        "speed": None if args.closed_loop else round(speed),
        "faults_planned": len(chaos.faults),
        "faults_injected": len(injected),
        "faults_recovered": len(recovered),
        "faults_by_kind": dict(sorted(Counter(f.kind for f in injected).items())),
        "recovery_seconds_max": max((f.recovered_after or 0.0 for f in recovered), default=0.0),
        "restarts": {k: v for k, v in chaos.restarts.items() if v},
        "facts": len(clean.facts),
        "events_lost": result.lost,
        "events_doubled": result.doubled,
        "events_extra": result.extra,
        "reports_compared": result.reports,
        "notifications_delivered": notified.delivered,
        "notifications_missing": notified.missing,
        "notifications_extra": notified.extra,
        "notifications_redelivered": notified.redelivered,
        "differing_rows": result.differing_rows,
        "differing_reports": result.differing,
        "wall_seconds": round(time.monotonic() - started, 1),
    }
    print(json.dumps(summary, sort_keys=True), flush=True)
    failed = (
        result.lost or result.doubled or result.extra or result.differing_rows
        or notified.missing or notified.extra
        or len(recovered) < len(chaos.faults)
    )  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
