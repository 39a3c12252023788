"""One world: a slice of openb's history played open loop, then a live copy of its last
hour played closed loop through the real pipeline and the live dispatcher, in one database,
on one kubesim cluster, against one quota tree (``run_replay(..., live_from=...)``).

The history (the rows created in the 12 hours before ``W``, a day before the trace's end)
must be exact per workspace against the trace up to the live instant; the live rows (the
copies, ``-live``) arrive suspended and only the dispatcher starts them; no decision is
stored before the live instant, and every admission is a live row's (or a history row's
the dispatcher itself preempted first). Some history rows still run at the live instant,
to their trace deletion, and hold the quota tree's capacity: a live copy waits for them.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

from sqlalchemy import select

from dlc_ledger.wiring.replay import run_replay
from kubesim.traces import live_rows, load_openb
from ledger.store.postgres import PostgresEventStore
from ledger.store.schema import events as events_table

HOUR = 3600


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def _events(store: PostgresEventStore, *types: str) -> list[Any]:
    with store.engine.connect() as conn:
        return list(
            conn.execute(
                select(events_table.c.type, events_table.c.occurred_at, events_table.c.data)
                .where(events_table.c.type.in_(types))
                .order_by(events_table.c.position)
            ).all()
        )


def test_history_open_loop_then_a_live_copy_under_the_dispatcher(
    store: PostgresEventStore, bootstrap: str, tmp_path: Path
) -> None:
    openb = load_openb()
    w = (openb.end - 24 * HOUR) // HOUR * HOUR
    history = openb.between(w - 12 * HOUR, w)
    at = w  # the live copy of the last hour starts at w: after every creation of the history
    trace = live_rows(history, (w - HOUR, w), at=at)
    live_names = {i.job_name for i in trace.instances[len(history.instances) :]}
    running_at = [
        i
        for i in history.instances
        if i.scheduled is not None and i.scheduled < at < (i.deleted or trace.end)
    ]
    assert len(history.instances) > 300 and len(live_names) > 20 and running_at
    live_from = trace.epoch + timedelta(seconds=at)

    # closed-loop.yaml, burstable capped at 9 GPUs: the history's two burstable rows
    # running at the live instant (8 + 1 GPUs) hold it all, so the live burstable copy
    # waits for the end of one of them
    resources = files("dlc_ledger.resources")
    tree = tmp_path / "tree.yaml"
    shipped = (resources / "quotas" / "closed-loop.yaml").read_text()
    tree.write_text(shipped.replace("max: {gpu/any: 12000}", "max: {gpu/any: 9000}"))
    assert tree.read_text() != shipped
    burstable = [i for i in running_at if i.workspace == "ws-burstable"]
    assert sum(i.gpu_milli for i in burstable) == 9000
    first_end = min(i.deleted or trace.end for i in burstable)
    (waiting,) = [
        i for i in trace.instances if i.job_name in live_names and i.workspace == "ws-burstable"
    ]

    started = time.monotonic()
    with as_file(resources / "pricebooks" / "demo-2026.yaml") as book:
        summary = run_replay(
            trace,
            quotas=tree,
            pricebook=book,
            store=store,
            bootstrap=bootstrap,
            data_dir=tmp_path,
            closed_loop=True,
            live_from=live_from,
            cycle=60,
            progress=None,
            timeout=300,
        )
    wall = time.monotonic() - started
    print("\n".join(summary.lines()), f"\nwall {wall:.1f} s")

    # the history: exact per workspace against the trace, to the live instant
    assert summary.ok and summary.mismatches == [] and summary.dead_letters == 0
    assert summary.workspaces_checked >= 3 and summary.instances == len(history.instances)

    # the live part: a closed loop of the copies alone
    figures = summary.closed_loop
    assert figures is not None and figures.jobs == len(live_names)
    assert figures.admitted > 0 and figures.never_admitted == 0

    # one database: the history's jobs and the live copies side by side
    submitted = {e.data["job_uid"]: e.data["name"] for e in _events(store, "JobSubmitted")}
    names = set(submitted.values())
    assert live_names <= names and {i.job_name for i in history.instances} <= names

    # the dispatcher decided nothing before the live instant, and admitted live rows only
    # (or history rows it had preempted itself)
    decisions = _events(store, "AdmissionDecided", "PreemptionDecided")
    assert decisions and min(e.occurred_at for e in decisions) >= live_from
    victims = {
        v["job_uid"] for e in decisions if e.type == "PreemptionDecided" for v in e.data["victims"]
    }
    admitted = {
        e.data["job_uid"]
        for e in decisions
        if e.type == "AdmissionDecided" and e.data["outcome"] == "admit"
    }
    assert {submitted[u] for u in admitted - victims} <= live_names
    assert {submitted[u] for u in admitted} & live_names
    # the history's occupancy counts in the one quota tree: the burstable copy is admitted
    # at the first cycle after a history row of its quota ended, not at its arrival
    (admission,) = [
        e.occurred_at
        for e in decisions
        if e.type == "AdmissionDecided"
        and e.data["outcome"] == "admit"
        and submitted[e.data["job_uid"]] == waiting.job_name
    ]
    freed = trace.epoch + timedelta(seconds=first_end)
    assert freed <= admission < freed + timedelta(seconds=120)
    assert admission > trace.epoch + timedelta(seconds=waiting.created + 60)

    # the live rows started only once admitted: no occupancy of a live row before its
    # admission; history rows ran through the live instant as the trace says
    admitted_at = {
        e.data["job_uid"]: e.occurred_at
        for e in reversed(decisions)
        if e.type == "AdmissionDecided" and e.data["outcome"] == "admit"
    }
    occupancies = _events(store, "OccupancyStarted")
    for e in occupancies:
        if submitted.get(e.data["job_uid"]) in live_names:
            assert e.occurred_at >= admitted_at[e.data["job_uid"]]
    ended = {e.data["occupancy_id"]: e.data["ended_at"] for e in _events(store, "OccupancyEnded")}
    history_runs = {
        submitted[e.data["job_uid"]]: (e.data["started_at"], ended.get(e.data["occupancy_id"]))
        for e in occupancies
        if e.data["job_uid"] not in victims and submitted[e.data["job_uid"]] not in live_names
    }
    for inst in running_at:  # through the live instant, to their own deletion
        assert history_runs[inst.job_name] == (
            _iso(trace.epoch + timedelta(seconds=inst.scheduled or 0)),
            None if inst.deleted is None else _iso(trace.epoch + timedelta(seconds=inst.deleted)),
        )
    assert wall < 90
