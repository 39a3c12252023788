"""Event builders and checks shared by the quota tests."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from ledger.envelopes import Envelope, EventData, make_envelope
from ledger.events import (
    JobSubmitted,
    OccupancyEnded,
    OccupancyStarted,
    QuotaSpec,
    ReplicaSpec,
)
from ledger.quotas import NO_QUOTA, QuotaTree, diff
from ledger.store.postgres import PostgresEventStore
from projections.quotas.projection import QuotaProjection
from projections.quotas.reads import UsageRow, usage_history
from tests.support.tables import table_rows

EPOCH = datetime(2026, 11, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return EPOCH + timedelta(seconds=seconds)


def envelope(data: EventData, stream: str, when: datetime) -> Envelope:
    return make_envelope(
        data,
        event_id=uuid.uuid4(),
        stream=stream,
        occurred_at=when,
        observed_at=when,
        source="test",
    )


def tree_events(
    tree: QuotaTree, when: datetime, current: QuotaTree | None = None
) -> list[Envelope]:
    out = []
    for event in diff(current or QuotaTree(), tree):
        quota_id = getattr(event, "quota_id", None) or getattr(
            getattr(event, "spec", None), "quota_id", None
        )
        stream = f"quota/{quota_id}" if quota_id else f"workspace/{event.workspace}"  # type: ignore[attr-defined]
        out.append(envelope(event, stream, when))
    return out


def submitted(
    uid: str,
    workspace: str,
    when: datetime,
    *,
    mode: str = "public",
    mgpu: int = 1000,
    cpu: int = 4000,
    memory: int = 8192,
    count: int = 1,
    quota: str | None = None,
    flavor: str = "gpu/any",
) -> Envelope:
    data = JobSubmitted(
        job_uid=uid,
        name=uid,
        workspace=workspace,
        quota=quota,
        billing_mode=mode,
        replicas=(
            ReplicaSpec(count=count, mgpu=mgpu, cpu_milli=cpu, memory_mib=memory, flavor=flavor),
        ),
    )
    return envelope(data, f"job/{uid}", when)


def transition(cls: type[EventData], uid: str, when: datetime) -> Envelope:
    return envelope(cls(job_uid=uid), f"job/{uid}", when)  # type: ignore[call-arg]


def occ_started(
    occ: str,
    uid: str,
    workspace: str,
    when: datetime,
    *,
    mode: str = "public",
    mgpu: int = 1000,
    cpu: int = 4000,
    memory: int = 8192,
    flavor: str = "gpu/any",
) -> Envelope:
    data = OccupancyStarted(
        occupancy_id=occ,
        job_uid=uid,
        pod_uid=occ,
        flavor=flavor,
        mgpu=mgpu,
        cpu_milli=cpu,
        memory_mib=memory,
        billing_mode=mode,
        workspace=workspace,
        started_at=when,
    )
    return envelope(data, f"job/{uid}", when)


def occ_ended(occ: str, uid: str, when: datetime) -> Envelope:
    return envelope(
        OccupancyEnded(occupancy_id=occ, job_uid=uid, pod_uid=occ, ended_at=when),
        f"job/{uid}",
        when,
    )


def history(store: PostgresEventStore) -> list[UsageRow]:
    """Every change point from the start, in time order."""
    with store.engine.connect() as conn:
        return usage_history(conn)


def dump_tables(store: PostgresEventStore) -> dict[str, list[tuple[str, ...]]]:
    """Every row of every table the quota projection owns, in a stable order (the sums
    of changes as nets: :func:`tests.support.tables.table_rows`)."""
    with store.engine.connect() as conn:
        return {
            table.name: sorted(tuple(map(repr, row)) for row in table_rows(conn, table))
            for table in QuotaProjection.tables
        }


def states(rows: Iterable[Any]) -> list[tuple[datetime, dict[tuple[str, str], Any]]]:
    """The full state after each change point (latest row per key, deleted dropped)."""
    by_at: dict[datetime, list[Any]] = defaultdict(list)
    for row in rows:
        by_at[row.at].append(row)
    state: dict[tuple[str, str], Any] = {}
    out = []
    for when in sorted(by_at):
        for row in by_at[when]:
            if row.deleted:
                state.pop((row.quota, row.flavor), None)
            else:
                state[(row.quota, row.flavor)] = row
        out.append((when, dict(state)))
    return out


def check_invariants(specs: Mapping[str, QuotaSpec], state: Mapping[tuple[str, str], Any]) -> None:
    children: dict[str, list[str]] = defaultdict(list)
    for name, spec in specs.items():
        if spec.parent is not None:
            children[spec.parent].append(name)
    flavors = {f for (_, f) in state}
    for flavor in flavors:
        total_lent = total_borrowed = 0
        for name, spec in specs.items():
            row = state.get((name, flavor))
            if row is None:
                continue
            if children[name]:
                assert row.used == sum(
                    state[(c, flavor)].used for c in children[name] if (c, flavor) in state
                ), (name, flavor)
            within = row.used - row.borrowed
            assert row.borrowed >= 0 and within >= 0, (name, flavor, row)
            if spec.parent is not None:
                assert within <= row.min, (name, flavor, row)
            else:
                assert row.borrowed == 0
            if spec.parent is None and children[name]:
                # a root's over-admission covers what its tree could not lend, held back
                # by lend limits: at least its usage above its cap
                assert row.over_admitted >= max(0, row.used - row.max), (name, flavor, row)
            else:
                assert row.over_admitted == max(0, row.used - row.max), (name, flavor, row)
            total_lent += row.lent
            total_borrowed += row.borrowed
        assert total_lent == total_borrowed, (flavor, total_lent, total_borrowed)
        assert (NO_QUOTA, flavor) not in state or state[(NO_QUOTA, flavor)].borrowed == 0
