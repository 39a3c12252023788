"""Occupancy at an instant, checked against the openb trace itself (alibaba/clusterdata, CC BY 4.0).

A few hundred openb pods become events with the DESIGN §8 mapping; the CLI's
``report occupancy --at T --group-by workspace`` must equal a direct sum over the
trace rows whose [scheduled, deleted) interval contains T, at 20 instants
(evenly spread, plus exact interval boundaries to pin down half-openness).
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import timedelta
from typing import Any

from consumers.projector import Projector
from kubesim.traces import TraceInstance, load_openb
from ledger.events import JobSubmitted, JobSucceeded, OccupancyEnded, OccupancyStarted, ReplicaSpec
from ledger.store.postgres import PostgresEventStore
from projections.registry import all_projections
from tests.support.builders import Narrator
from tests.support.clis import CliCall

ROWS = 300


def _events(instances: tuple[TraceInstance, ...], epoch: Any) -> Narrator:
    n = Narrator("openb")
    for inst in instances:
        uid = f"openb-{inst.job_name}"
        stream = f"job/{uid}"
        created = epoch + timedelta(seconds=inst.created)
        n.tell(
            JobSubmitted(
                job_uid=uid,
                name=inst.job_name,
                namespace=inst.namespace,
                workspace=inst.workspace,
                user=inst.user,
                priority=inst.priority,
                billing_mode=inst.billing_mode,  # type: ignore[arg-type]
                replicas=(
                    ReplicaSpec(
                        mgpu=inst.gpu_milli, cpu_milli=inst.cpu_milli, memory_mib=inst.memory_mib
                    ),
                ),
            ),
            stream,
            created,
        )
        if inst.scheduled is None:
            continue
        started = epoch + timedelta(seconds=inst.scheduled)
        n.tell(
            OccupancyStarted(
                occupancy_id=f"{uid}-0",
                job_uid=uid,
                pod_uid=f"{uid}-0",
                pod_name=inst.pod_name,
                mgpu=inst.gpu_milli,
                cpu_milli=inst.cpu_milli,
                memory_mib=inst.memory_mib,
                billing_mode=inst.billing_mode,  # type: ignore[arg-type]
                workspace=inst.workspace,
                user=inst.user,
                started_at=started,
            ),
            stream,
            started,
        )
        if inst.deleted is not None:
            ended = epoch + timedelta(seconds=inst.deleted)
            n.tell(
                OccupancyEnded(
                    occupancy_id=f"{uid}-0", job_uid=uid, pod_uid=f"{uid}-0", ended_at=ended
                ),
                stream,
                ended,
            )
            n.tell(JobSucceeded(job_uid=uid), stream, ended)
    return n


def _expected(instances: tuple[TraceInstance, ...], t: int) -> list[dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"mgpu": 0, "cpu_milli": 0, "memory_mib": 0, "jobs": 0}
    )
    for inst in instances:
        if inst.scheduled is None or inst.scheduled > t:
            continue
        if inst.deleted is not None and inst.deleted <= max(t, inst.scheduled):
            continue
        g = groups[inst.workspace]
        g["mgpu"] += inst.gpu_milli
        g["cpu_milli"] += inst.cpu_milli
        g["memory_mib"] += inst.memory_mib
        g["jobs"] += 1
    return [{"workspace": ws, **groups[ws]} for ws in sorted(groups)]


def test_occupancy_at_instants_matches_the_trace(store: PostgresEventStore, cli: CliCall) -> None:
    trace = load_openb()
    instances = trace.instances[:ROWS]
    store.append(_events(instances, trace.epoch).events)
    Projector(store, all_projections()).catch_up()

    first = min(i.created for i in instances)
    last = max(i.deleted or i.created for i in instances)
    spread = [first + (last - first) * k // 14 for k in range(1, 15)]
    scheduled = sorted({i.scheduled for i in instances if i.scheduled is not None})
    deleted = sorted({i.deleted for i in instances if i.deleted is not None})
    boundaries = [scheduled[len(scheduled) // 3], scheduled[2 * len(scheduled) // 3]]
    boundaries += [deleted[len(deleted) // 4], deleted[len(deleted) // 2], deleted[-2]]
    boundaries += [deleted[len(deleted) // 2] - 1]
    instants = spread + boundaries
    assert len(set(instants)) == 20

    busy = 0
    for t in instants:
        iso = (trace.epoch + timedelta(seconds=t)).isoformat()
        got = json.loads(
            cli("report", "occupancy", "--at", iso, "--group-by", "workspace", "--format", "json")
        )
        assert got == _expected(instances, t), f"at trace second {t}"
        busy += bool(got)
    assert busy >= 15  # the instants do look at a busy cluster
