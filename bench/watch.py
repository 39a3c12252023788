"""Watcher throughput and full-replay wall time.

1. ``watch_events_per_s``: pod watch events parsed, mapped and published (to a real Tansu
   broker, acks=all) by one watcher process. kubesim runs in a separate process with N pod
   lifecycles (create, bind, terminate, delete = 4 events each) already in its watch history;
   the watcher watches from resourceVersion 1, so the stream is as fast as the server can write
   it and the figure is the watcher's own rate (JSON lines → tracker → envelopes → producer).
2. ``replay_openb_seconds``: wall time of ``run_replay`` over the full openb trace at
   ``--speed max`` (kubesim → watchers → Kafka → ingest → PostgreSQL → projections), into a
   scratch database.

Last stdout line: JSON with ``watch_events_per_s`` and ``replay_openb_seconds``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

__all__ = ["main"]


def _bind(pod: dict[str, Any], *, node: str, now: str) -> dict[str, Any]:
    from kubesim.objects import bind_pod

    return bind_pod(pod, node, now)


def _finish(pod: dict[str, Any], *, now: str) -> dict[str, Any]:
    from kubesim.objects import terminate_pod

    return terminate_pod(pod, now, failed=False)


def serve(pods: int) -> int:
    """Child process: a kubesim whose history holds ``pods`` pod lifecycles."""
    from kubesim import BATCH_JOBS, PODS, KubeSim
    from kubesim.objects import job_object, pod_object

    sim = KubeSim(history_size=4 * pods + 1_000, bookmark_interval=0.2).start()
    job = sim.cluster.create(
        BATCH_JOBS,
        job_object(
            "bench",
            "bench",
            labels={"dlc.ledger/workspace": "ws-bench"},
            annotations={"dlc.ledger/gpu-milli": "500"},
            cpu_milli=4000,
            memory_mib=16384,
            gpus=1,
            priority=0,
        ),
    )
    for i in range(pods):
        name = f"bench-{i:06d}"
        sim.store.create(PODS, pod_object(name, job, sim.clock.timestamp()))
        now = sim.clock.timestamp()
        sim.store.update(PODS, "bench", name, partial(_bind, node=f"n{i % 50}", now=now))
        sim.advance(1)
        sim.store.update(PODS, "bench", name, partial(_finish, now=sim.clock.timestamp()))
        sim.store.delete(PODS, "bench", name)
    print(json.dumps({"url": sim.url, "rv": sim.store.resource_version}), flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    sim.stop()
    return 0


def watch_rate(bootstrap: str, pods: int, workdir: Path) -> dict[str, float]:
    from kubernetes import client

    from consumers.producer import EventPublisher
    from consumers.topics import ensure_topic
    from consumers.watchers.listwatch import PODS, WatchSettings
    from consumers.watchers.runner import Watcher

    child = subprocess.Popen(
        [sys.executable, "-m", "bench.watch", "--serve", str(pods)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        info = json.loads(child.stdout.readline())
        topic = f"bench-watch-{uuid.uuid4().hex[:8]}"
        ensure_topic(bootstrap, topic, partitions=4)
        publisher = EventPublisher(bootstrap, data_dir=workdir / "spool", topic=topic)
        watcher = Watcher(
            client.Configuration(host=info["url"]),
            publisher.publish,
            cluster="bench",
            resources=(PODS,),
            settings=WatchSettings(read_timeout=60, resync_seconds=None),
        )
        watcher.loops["pods"].rv = 1  # stream the whole history
        started = time.perf_counter()
        watcher.start()
        while not watcher.caught_up(int(info["rv"])):
            time.sleep(0.005)
        assert watcher.flush(60)
        seconds = time.perf_counter() - started
        events = watcher.loops["pods"].stats.events
        published = watcher.publisher.stats.published
        watcher.stop()
        publisher.close()
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(30)
    return {
        "watch_events": events,
        "watch_published": published,
        "watch_seconds": round(seconds, 3),
        "watch_events_per_s": round(events / seconds),
        "publish_share": round(watcher.publisher.stats.publish_seconds / seconds, 3),
    }


def replay_seconds(bootstrap: str, workdir: Path) -> dict[str, float]:
    from bench.databases import scratch_database
    from dlc_ledger.wiring.replay import run_replay
    from ledger.store.engines import make_engine
    from ledger.store.postgres import PostgresEventStore
    from migrations.runner import upgrade

    with scratch_database() as url:
        engine = make_engine(url)
        upgrade(engine)
        store = PostgresEventStore(engine)
        try:
            started = time.perf_counter()
            summary = run_replay(
                "openb", "openb", store=store, bootstrap=bootstrap, data_dir=workdir, progress=None
            )
            seconds = time.perf_counter() - started
        finally:
            store.close()
    for line in summary.lines():
        print(line)
    if not summary.ok:
        raise SystemExit("replay did not match the trace")
    return {
        "replay_openb_seconds": round(seconds, 1),
        "replay_events_stored": summary.events_stored,
        "replay_events_per_s": round(summary.events_stored / seconds),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench watch")
    parser.add_argument("--pods", type=int, default=15_000, help="pod lifecycles (x4 events)")
    parser.add_argument("--no-replay", action="store_true", help="skip the openb replay")
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        return serve(args.serve)
    from dlc_ledger.wiring.broker import EmbeddedBroker

    result: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="dlc-bench-watch-") as tmp:
        workdir = Path(tmp)
        with EmbeddedBroker(workdir / "broker", topic="dlc.cluster-events") as broker:
            result |= watch_rate(broker.bootstrap, args.pods, workdir)
            print(
                f"watch: {result['watch_events']} pod events in {result['watch_seconds']} s"
                f" = {result['watch_events_per_s']:,} /s (publishing {result['publish_share']:.0%})"
            )
            if not args.no_replay:
                result |= replay_seconds(broker.bootstrap, workdir)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
