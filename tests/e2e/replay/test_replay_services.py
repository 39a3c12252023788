"""The DLRM trace as services, end to end: each app one Deployment whose replicas come and go
with its instances, each instance's pod occupying exactly as the trace says; and the combined
replay, openb training and DLRM inference on one cluster and one quota tree (issue 46).

Reduced for the default suite: a few DLRM apps (every instance of each: older than the trace,
ended in it, still running at its end), and the combined trace on a window where both run.
"""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select

from dlc_ledger.wiring.replay import load_replay_trace, run_replay
from dlc_ledger.wiring.replay.verify import ReplaySummary, check_usage
from kubesim.driver import TRACE_FIELD_MANAGER, pod_names
from kubesim.traces import DLRM_CSV, Trace
from ledger.store.postgres import PostgresEventStore
from ledger.store.schema import events as events_table
from tests.support.clis import CliCall
from tests.support.demo_files import COMBINED_QUOTAS

#: small apps with rows from before the trace, rows ended in it and rows running at its end
APPS = ("app_15", "app_80", "app_98")


def _events(store: PostgresEventStore, source: str, *types: str) -> list[tuple[str, Any, Any]]:
    with store.engine.connect() as conn:
        return [
            (r.type, r.occurred_at, r.data)
            for r in conn.execute(
                select(events_table.c.type, events_table.c.occurred_at, events_table.c.data)
                .where(events_table.c.source == source, events_table.c.type.in_(types))
                .order_by(events_table.c.position)
            )
        ]


def _iso(trace: Trace, seconds: int) -> str:
    return (trace.epoch + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def _check_pods(store: PostgresEventStore, trace: Trace, source: str) -> None:
    """Each scheduled row's pod occupied once, from its scheduled second to its deletion."""
    names = pod_names(trace)
    rows = _events(store, source, "OccupancyStarted", "OccupancyEnded")
    started = {d["occupancy_id"]: d for t, _, d in rows if t == "OccupancyStarted"}
    ended = {d["occupancy_id"]: d["ended_at"] for t, _, d in rows if t == "OccupancyEnded"}
    by_pod = {d["pod_name"]: (d["started_at"], ended.get(o)) for o, d in started.items()}
    assert len(by_pod) == len(started)  # one occupancy per pod
    scheduled = [i for i in trace.instances if i.scheduled is not None]
    assert set(by_pod) == {names[(i.namespace, i.job_name)] for i in scheduled}
    for inst in scheduled:
        want = (
            _iso(trace, inst.scheduled or 0),
            None if inst.deleted is None else _iso(trace, inst.deleted),
        )
        assert by_pod[names[(inst.namespace, inst.job_name)]] == want, inst.job_name


def test_dlrm_apps_replay_as_services_exact_to_the_second(
    store: PostgresEventStore, bootstrap: str, tmp_path: Path
) -> None:
    part = tmp_path / "dlrm-apps.csv"
    with DLRM_CSV.open("r", encoding="utf-8", newline="") as src, part.open("w", newline="") as out:
        reader = csv.DictReader(src)
        writer = csv.DictWriter(out, fieldnames=list(reader.fieldnames or ()))
        writer.writeheader()
        writer.writerows(r for r in reader if r["app_name"] in APPS)
    summary = run_replay(
        part, "dlrm", store=store, bootstrap=bootstrap, data_dir=tmp_path, progress=None
    )
    trace = load_replay_trace(part, "dlrm")
    assert summary.ok and summary.dead_letters == 0 and summary.projected, summary.lines()
    assert summary.mismatches == []
    assert summary.expected_services == summary.services == len(APPS)
    assert summary.workspaces_checked == len(APPS)
    lines = summary.lines()
    assert f": {len(trace.instances)} replicas of 3 services on " in lines[0]
    assert any("3 of 3, replica-seconds checked" in line for line in lines)
    source = "kube-watcher/replay-dlrm"
    _check_pods(store, trace, source)
    facts = _events(
        store, source, "JobSubmitted", "WorkloadCreated", "WorkloadScaled", "WorkloadDeleted"
    )
    assert [t for t, _, _ in facts if t in ("JobSubmitted", "WorkloadDeleted")] == []
    created = {d["name"]: d for t, _, d in facts if t == "WorkloadCreated"}
    assert set(created) == {a.replace("_", "-") for a in APPS}
    for app in APPS:
        rows = [i for i in trace.instances if i.workspace == app]
        made = created[app.replace("_", "-")]
        assert made["workspace"] == app and made["kind"] == "Deployment"
        assert made["replicas"] == sum(1 for i in rows if i.pre_existing)
        # one scale per instance created after second 0, one per instance deleted
        scales = [
            d for t, _, d in facts if t == "WorkloadScaled" and d["job_uid"] == made["job_uid"]
        ]
        ups = sum(1 for i in rows if not i.pre_existing)
        downs = sum(1 for i in rows if i.deleted is not None)
        assert len(scales) == ups + downs
        assert {d["by"] for d in scales} == {TRACE_FIELD_MANAGER}
        assert scales[-1]["to_replicas"] == sum(1 for i in rows if i.deleted is None)
    # the check sees a replica that ran one second longer than the trace says
    first = next(i for i in trace.instances if i.deleted is not None)
    longer = tuple(
        replace(i, deleted=(i.deleted or 0) + 1) if i == first else i for i in trace.instances
    )
    altered = ReplaySummary.expected(replace(trace, instances=longer), summary.cluster, "-")
    check_usage(altered, store, replace(trace, instances=longer))
    assert not altered.ok
    assert any(m.startswith(f"workspace {first.workspace}:") for m in altered.mismatches)
    assert any("replicas: store" in m for m in altered.mismatches)
    assert any("desired replica-seconds" in m for m in altered.mismatches)


def test_openb_and_dlrm_replay_on_one_cluster_and_one_quota_tree(
    store: PostgresEventStore, bootstrap: str, tmp_path: Path, cli: CliCall
) -> None:
    full = load_replay_trace("openb+dlrm", "openb+dlrm")
    start, end = 2_650_000, 2_760_000  # openb's jobs and DLRM's last day together
    window = (full.epoch + timedelta(seconds=start), full.epoch + timedelta(seconds=end))
    summary = run_replay(
        "openb+dlrm",
        "openb+dlrm",
        window=window,
        quotas=COMBINED_QUOTAS,
        store=store,
        bootstrap=bootstrap,
        data_dir=tmp_path,
        progress=None,
    )
    trace = full.between(start, end)
    assert summary.ok and summary.dead_letters == 0, summary.lines()
    assert summary.mismatches == []
    training = {i.workspace for i in trace.instances if i.service is None}
    inference = {i.workspace for i in trace.instances if i.service is not None}
    assert training and len(inference) > 5
    assert summary.workspaces_checked == len(training | inference)
    assert summary.expected_services == summary.services == len(inference)
    _check_pods(store, trace, "kube-watcher/replay-openb-dlrm")
    # both parts on one tree: at an instant, the inference quota holds DLRM's running
    # replicas and the training quotas openb's jobs
    at = end
    running = [
        i
        for i in trace.instances
        if i.scheduled is not None and i.scheduled <= at and (i.deleted is None or at < i.deleted)
    ]
    rows = json.loads(cli("report", "quota-usage", "--at", _iso(trace, at), "--format", "json"))
    used = {(r["quota"], r["flavor"]): r["used"] for r in rows}
    dlrm_cpu = sum(i.cpu_milli for i in running if i.service is not None)
    assert dlrm_cpu > 0 and used[("inference", "cpu")] == dlrm_cpu
    openb_cpu = sum(i.cpu_milli for i in running if i.service is None)
    assert openb_cpu > 0
    assert (
        sum(used.get((q, "cpu"), 0) for q in ("ls", "guaranteed", "burstable", "be")) == openb_cpu
    )
