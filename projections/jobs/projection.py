"""The jobs projection: folds a page of events into ``job_state`` and ``job_timeline``.

The one module of the read model that writes. A page's facts fold in fold order; a
fact that sorts before one already folded re-folds its job from the job's stored facts,
read through the store port's unit of work the page was read in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from ledger.store.base import RecordedEvent, UnitOfWork
from projections.base import Projection
from projections.bulk import copy_table, fetch_keyed
from projections.jobs.fold import (
    ABOUT_OWN_JOB,
    OCCUPANCY,
    SUBMISSIONS,
    Fact,
    FoldedJob,
    fact_target,
    fold_facts,
    folded_to,
)
from projections.jobs.tables import job_state, job_timeline, job_workspace_quotas
from projections.jobs.timeline import named_jobs, rows_elsewhere

__all__ = ["JobsProjection"]

_DECISIONS = frozenset({"AdmissionDecided", "PreemptionDecided"})

# columns in FoldedJob's field order, so a row constructs it positionally
_TAKE_SQL = "DELETE FROM job_state WHERE job_uid = ANY(%s) RETURNING {}".format(
    ", ".join(
        "replicas::text" if f.name == "replicas" else f'"{f.name}"' for f in fields(FoldedJob)
    )
)


def _take(conn: Connection, uids: set[str]) -> dict[str, FoldedJob]:
    """Take the stored rows of ``uids`` out of job_state and return their state.

    Every job a page names is folded and written back by the same transaction, so
    deleting while loading finds each row once, where a SELECT and then a DELETE of
    the same keys probed the primary key twice (replicas stay JSON text).
    """
    return {row[0]: FoldedJob(*row) for row in fetch_keyed(conn, _TAKE_SQL, (list(uids),))}


class JobsProjection(Projection):
    """Folds job lifecycle, occupancy and decision events into job_state and job_timeline.

    A job's state is a function of its facts in :func:`fold_order`, whatever order they
    were stored in (Kafka orders per key only, a watcher re-lists): facts of a page fold
    in that order, and a fact that sorts before one already folded re-folds the job
    from all its stored facts.
    """

    name = "jobs"
    cost = 2.2
    tables = (job_state, job_timeline, job_workspace_quotas)

    def apply(self, uow: UnitOfWork, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        # one pass: timeline rows (they depend on the event alone) and each job's facts
        timeline: list[tuple[Any, ...]] = []
        facts: dict[str, list[Fact]] = {}
        bindings: dict[str, str | None] | None = None
        bound: dict[str, str | None] = {}
        for event in events:
            kind = event.type
            stream = event.stream
            data = event.data
            if kind == "WorkspaceBound":
                if bindings is None:
                    bindings = _bindings(conn)
                bindings[data["workspace"]] = bound[data["workspace"]] = data.get("quota")
                continue
            own = stream[4:] if stream.startswith("job/") else None
            if own is not None and kind in ABOUT_OWN_JOB:
                # nearly every event: a transition or pod of its own stream's job, whose
                # timeline reads it from the store; only another job it names needs a row
                uid = data.get("job_uid")
                if isinstance(uid, str) and uid != own:
                    timeline.extend(rows_elsewhere(event, named_jobs(event)))
            elif kind in OCCUPANCY or kind in _DECISIONS or own is not None:
                named = named_jobs(event)
                if named:
                    timeline.extend(rows_elsewhere(event, named))
            target = fact_target(event)
            if not target:
                continue
            fact = Fact(kind, data, event.occurred_at, event.position)
            if kind in SUBMISSIONS and not data.get("quota"):
                if bindings is None:
                    bindings = _bindings(conn)
                fact.bound_quota = bindings.get(data.get("workspace") or "")
            facts.setdefault(target, []).append(fact)
        if facts:
            jobs = _take(conn, set(facts))
            late = {
                uid
                for uid, new in facts.items()
                if uid in jobs and min(f.order for f in new) < folded_to(jobs[uid])
            }
            if late:
                stored = _stored_facts(uow, conn, late, jobs, events[0].position)
                for uid, old in stored.items():
                    facts[uid] = old + facts[uid]
            for uid, new in facts.items():
                job = None if uid in late else jobs.get(uid)
                jobs[uid] = fold_facts(uid, job, new)
            # every job taken out or created above goes back, folded
            copy_table(conn, job_state, [jobs[uid].row() for uid in sorted(jobs)])
        copy_table(conn, job_timeline, timeline)
        for workspace, quota in sorted(bound.items()):
            conn.execute(
                pg_insert(job_workspace_quotas)
                .values(workspace=workspace, quota=quota)
                .on_conflict_do_update(index_elements=["workspace"], set_={"quota": quota})
            )


def _bindings(conn: Connection) -> dict[str, str | None]:
    return {ws: quota for ws, quota in conn.execute(select(job_workspace_quotas))}


def _stored_facts(
    uow: UnitOfWork, conn: Connection, uids: set[str], jobs: dict[str, FoldedJob], before: int
) -> dict[str, list[Fact]]:
    """The facts of ``uids`` stored before position ``before``: their own streams, and
    the facts about them on other streams (their ``job_timeline`` rows point at them).

    A JobSubmitted naming no quota takes the quota it was resolved to when first
    folded (the binding then), kept in the job's row.
    """
    streams = [f"job/{uid}" for uid in sorted(uids)]
    stored = uow.read_streams(streams, before=before)
    elsewhere = conn.execute(
        select(job_timeline.c.position)
        .where(
            job_timeline.c.job_uid.in_(sorted(uids)),
            job_timeline.c.position < before,
            job_timeline.c.type.in_(sorted(ABOUT_OWN_JOB)),
        )
        .distinct()
    ).scalars()
    stored += uow.read_positions(sorted(elsewhere))
    out: dict[str, list[Fact]] = {uid: [] for uid in uids}
    for event in stored:
        uid = fact_target(event)
        if uid not in out:
            continue
        fact = Fact(event.type, event.data, event.occurred_at, event.position)
        if event.type in SUBMISSIONS and not event.data.get("quota"):
            fact.bound_quota = jobs[uid].quota
        out[uid].append(fact)
    return out
