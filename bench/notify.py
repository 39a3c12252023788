"""``python -m bench notify``: delivery lag of the event centre under a burst of job events.

A burst of ``--jobs`` job failures (default 10,000, one event each, after their
submissions) is appended in batches of 500 while the sender (``consumers.notifications``:
match, then send) runs in a thread, with one rule matching them all and a webhook receiver
on loopback. Lag = the receiver's clock at receipt - the failure's ``recorded_at`` (its
append), per notification; p50/p99/max and throughput. Baseline, same run: signed POSTs
to the same receiver straight from a loop on one kept-alive client (the transport alone).

A burst to one target is a storm: more than 20 due at once become one summary message,
and a notification counts as received when the summary listing it arrives.

Goal (issue 35): p99 < 2 s.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.databases import scratch_database
from consumers.notifications import step
from dlc_ledger.services.notifications import apply_rules_file, grant_secret
from dlc_ledger.services.quotas import apply_quota_file
from ledger.envelopes import Envelope, EventData, make_envelope
from ledger.events import JobFailed, JobSubmitted
from ledger.ids import fact_event_id
from ledger.store.engines import make_engine
from ledger.store.postgres import PostgresEventStore
from migrations.runner import upgrade

SECRET = "whsec_" + base64.b64encode(b"bench-notify-secret-32-bytes-xx!").decode()
T0 = datetime(2027, 1, 5, tzinfo=UTC)


class _Receiver:
    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                now = time.time()
                message = json.loads(body)
                # a storm comes as summaries: each notification listed by its id
                ids = (
                    [n["id"] for n in message["data"]["notifications"]]
                    if message.get("type") == "notifications.summary"
                    else [self.headers["webhook-id"]]
                )
                with lock:
                    for nid in ids:
                        owner.arrived.setdefault(nid, now)
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"


def _job(uid: str, data: EventData, what: str, at: datetime) -> Envelope:
    return make_envelope(
        data,
        event_id=fact_event_id("bench", "Job", uid, what),
        stream=f"job/{uid}",
        occurred_at=at,
        observed_at=at,
        source="kube-watcher/bench",
    )


def _baseline(url: str, count: int) -> float:
    import httpx
    from standardwebhooks.webhooks import Webhook

    hook = Webhook(SECRET)
    client = httpx.Client()  # kept alive, as the sender's
    started = time.perf_counter()
    for i in range(count):
        body = json.dumps({"type": "job.failed", "data": {"i": i}}).encode()
        now = datetime.now(UTC)
        client.post(
            url,
            content=body,
            headers={
                "webhook-id": f"base-{i}",
                "webhook-timestamp": str(int(now.timestamp())),
                "webhook-signature": hook.sign(f"base-{i}", now, body),
            },
        )
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench notify")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args(argv)
    os.environ["BENCH_HOOK"] = SECRET
    os.environ["DLC_WEBHOOK_ALLOW"] = "127.0.0.1"  # the bench's receiver is on loopback
    receiver = _Receiver()
    with scratch_database("dlcbench_notify") as url:
        engine = make_engine(url)
        upgrade(engine)
        engine.dispose()
        store = PostgresEventStore(url)
        apply_quota_file(
            store,
            "quotas:\n  - name: q\n    min: {gpu/any: 1000}\n    workspaces: [ws-bench]\n",
            principal="bench",
            at=T0,
        )
        grant_secret(store, "ws-bench", "BENCH_HOOK", principal="bench")
        apply_rules_file(
            store,
            f"""
rules:
  - name: all-failures
    workspace: ws-bench
    events: [JobFailed]
    target: {{webhook: "{receiver.url}", secret_env: BENCH_HOOK}}
""",
            principal="bench",
            at=T0,
        )
        submissions = [
            _job(
                f"j{i}",
                JobSubmitted(job_uid=f"j{i}", name=f"train-{i}", workspace="ws-bench"),
                "submitted",
                T0,
            )
            for i in range(args.jobs)
        ]
        for i in range(0, len(submissions), 2000):
            store.append(submissions[i : i + 2000])
        with store.transaction() as uow:  # the submissions are not what is measured
            from consumers.notifications.matcher import match

            match(uow, T0)
        stop = threading.Event()

        def run() -> None:
            while not stop.is_set():
                matched, sent = step(store, T0 + timedelta(hours=1))
                if not matched.queued and not sent.attempted:
                    time.sleep(0.02)

        sender = threading.Thread(target=run, daemon=True)
        sender.start()
        started = time.perf_counter()
        for i in range(0, args.jobs, args.batch):
            batch = [
                _job(f"j{k}", JobFailed(job_uid=f"j{k}"), "failed", T0 + timedelta(seconds=k))
                for k in range(i, min(i + args.batch, args.jobs))
            ]
            store.append(batch)
        while len(receiver.arrived) < args.jobs and time.perf_counter() - started < 1800:
            time.sleep(0.1)
        elapsed = time.perf_counter() - started
        stop.set()
        sender.join(timeout=30)
        recorded = {
            r.data["job_uid"]: r.recorded_at.timestamp()
            for page in _pages(store, "JobFailed")
            for r in page
        }
        outbox = {
            r.data["notification_id"]: r.data["payload"]["job_uid"]
            for page in _pages(store, "NotificationQueued")
            for r in page
        }
        lags = sorted(
            receiver.arrived[nid] - recorded[uid]
            for nid, uid in outbox.items()
            if nid in receiver.arrived and uid in recorded
        )
        store.close()
    baseline = _baseline(receiver.url, min(args.jobs, 2000))
    per_base = baseline / min(args.jobs, 2000)
    p50, p99 = statistics.quantiles(lags, n=100)[49], statistics.quantiles(lags, n=100)[98]
    print(
        f"{len(lags):,} of {args.jobs:,} delivered in {elapsed:.1f} s "
        f"({len(lags) / elapsed:,.0f}/s): lag p50 {p50:.2f} s, p99 {p99:.2f} s, "
        f"max {lags[-1]:.2f} s; baseline (signed POSTs from a loop) {1 / per_base:,.0f}/s"
    )
    print(
        json.dumps(
            {
                "jobs": args.jobs,
                "delivered": len(lags),
                "seconds": round(elapsed, 2),
                "lag_p50_s": round(p50, 3),
                "lag_p99_s": round(p99, 3),
                "lag_max_s": round(lags[-1], 3),
                "per_s": round(len(lags) / elapsed),
                "baseline_posts_per_s": round(1 / per_base),
            }
        )
    )
    return 0


def _pages(store: PostgresEventStore, kind: str) -> Any:
    position = 0
    while True:
        page = store.read_by_type([kind], after_position=position, limit=5000)
        if not page:
            return
        yield page
        position = page[-1].position
