"""`python -m kubesim`: serve a simulated cluster on loopback, optionally replaying a trace.

Prints the URL (and a kubeconfig path with --kubeconfig) so a watcher or the demo can point
the real `kubernetes` client at it; keeps serving after the replay ends until interrupted.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path

from kubesim.clock import DEFAULT_EPOCH, parse_time
from kubesim.driver import Speed, TraceDriver
from kubesim.server import KubeSim
from kubesim.traces import TRACE_NAMES, load_dlrm, load_openb, load_trace

__all__ = ["main"]


def _speed(text: str) -> Speed:
    if text == "max":
        return "max"
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("speed must be 'max' or a positive number")
    return value


def _kubeconfig(url: str) -> str:
    return (
        "apiVersion: v1\nkind: Config\ncurrent-context: kubesim\n"
        f"clusters:\n- name: kubesim\n  cluster:\n    server: {url}\n"
        "users:\n- name: kubesim\n  user: {}\n"
        "contexts:\n- name: kubesim\n  context:\n    cluster: kubesim\n    user: kubesim\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubesim", description=__doc__)
    parser.add_argument(
        "--trace", help="openb | dlrm | openb+dlrm | path to an openb pod CSV or a DLRM CSV"
    )
    parser.add_argument("--nodes", help="openb node CSV (when --trace is an openb pod CSV path)")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--speed", type=_speed, default="max", help="'max' or N x real time")
    parser.add_argument("--epoch", default=None, help="RFC 3339 time of trace second 0")
    parser.add_argument("--history", type=int, default=100_000, help="events kept for watches")
    parser.add_argument("--max-backlog", type=int, default=2_000)
    parser.add_argument("--limit", type=int, default=None, help="replay only the first N rows")
    parser.add_argument("--kubeconfig", type=Path, help="write a kubeconfig for the server here")
    parser.add_argument("--exit-when-done", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    epoch = parse_time(args.epoch) if args.epoch else DEFAULT_EPOCH

    sim = KubeSim(host=args.host, port=args.port, epoch=epoch, history_size=args.history).start()
    print(f"kubesim listening on {sim.url}", flush=True)
    if args.kubeconfig:
        args.kubeconfig.write_text(_kubeconfig(sim.url))
        print(f"kubeconfig written to {args.kubeconfig}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    driver: TraceDriver | None = None
    try:
        if args.trace:
            if args.trace in TRACE_NAMES:
                trace = load_trace(args.trace, epoch)
            elif args.nodes:
                trace = load_openb(args.trace, args.nodes, epoch)
            else:
                trace = load_dlrm(args.trace, epoch)
            if args.limit:
                trace = trace.head(args.limit)
            driver = TraceDriver(sim, trace, args.speed, max_backlog=args.max_backlog).start()
            print(
                f"replaying {trace.name}: {len(trace.instances)} jobs, {len(trace.nodes)} nodes, "
                f"{trace.end} s at speed {args.speed}",
                flush=True,
            )
        while not stop.wait(1.0):
            if driver is not None and driver.finished:
                print(
                    f"replay done at {sim.clock.timestamp()} (rv {sim.store.resource_version}, "
                    f"{driver.overcommits} overcommits)",
                    flush=True,
                )
                driver = None
                if args.exit_when_done:
                    break
    except KeyboardInterrupt:
        pass
    finally:
        if driver is not None:
            driver.stop()
        sim.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
