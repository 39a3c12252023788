"""Quota tree and raw quota usage over cluster time: the facts behind "who uses,
borrows and lends what, and when".

Kafka keeps order per job only, so the store's positions are not cluster-time order
across jobs (in the openb replay almost every pod event arrives after later ones). The
projection therefore keeps nothing that depends on arrival order across jobs: it
records each event's effect as signed changes of raw usage per leaf quota and flavor,
stamped with the cluster time it happened at (``quota_changes``), and the tree's
changes likewise (``quota_tree_history``). Sums of changes commute, so a late event
simply lands at its own instant; the figures at any instant, and the change points of
any window, are derived at read time (:mod:`projections.quotas.reads`,
:mod:`ledger.usage_boards`).

Tables (migrations ``0003_quotas``, ``0006_quota_changes``, ``0009_quota_change_hours``,
``0010_quota_change_days``, ``0013_quota_job_intervals``, ``0021_quota_rollups``,
``0026_quota_workloads``):

- ``quota_nodes`` / ``quota_workspaces``: the current tree and bindings, in arrival
  order (``dlc-ledger quotas apply`` diffs against them);
- ``quota_tree_history``: every spec a quota had, from when (``spec`` null: deleted);
- ``quota_changes``: per change point (a page's events at one instant in one leaf
  quota, keyed by the first one's position), per flavor, the change of used,
  idle-mode used, queued demand, running jobs and queued jobs;
- ``quota_change_hours`` / ``quota_change_days``: ``quota_changes`` summed per UTC hour
  (day), quota and flavor (so reading an instant sums days, then at most a day of hours,
  then at most an hour of change rows);
- ``quota_own_usage``: the running totals of ``quota_changes`` (the latest raw usage);
- ``quota_rollup_*``: the settled rows at each hour with a change, kept by the
  projection's maintenance after a catch-up (:mod:`projections.quotas.rollups`);
- ``quota_workloads``: the services and notebooks among the jobs (usage by kind);
- ``quota_jobs``, ``quota_occupancies``: the fold's state (each job's quota, request,
  submission, first end and pods' intervals; each pod's quota, resources and interval).

Rules (also in ``docs/quotas.md``):

- a job's quota is its JobSubmitted ``quota``, else the quota its workspace is bound to
  at submission (a job seen first through its pod: the pod's ``quota``, else the
  binding then); a job with neither counts under quota ``-``, and so does usage whose
  quota is, at the instant read, deleted or not a leaf;
- used = open pods' resources (``gpu/<model>``/``gpu/any`` in mGPU from the pod's
  flavor, ``cpu`` in milli-cores, ``memory`` in MiB) from the pod's ``started_at`` to
  its ``ended_at``; idle-mode pods always count as borrowed;
- a job runs while one of its pods occupies; it is queued from its submission until its
  end (JobSucceeded / Failed / Stopped / Deleted) whenever it does not occupy (before its
  first pod, between pods); queued demand = its requested resources (replicas x count)
  then. Its row keeps its facts (submission, first end, pods' intervals), and a page
  writes its timeline after minus before, so the order its events arrive in never
  matters (its end may be stored before its start: two watchers publish them);
- a pod's end is stamped no earlier than its start, so no instant ever shows negative
  usage or counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Connection, select

from ledger.events import QuotaSpec
from ledger.store.base import RecordedEvent, UnitOfWork
from ledger.usage_boards import RAW
from projections.base import Projection
from projections.bulk import copy_table, driver, take_rows, upsert_rows
from projections.quotas.buckets import day_first_hour, hour_index, hour_start
from projections.quotas.fold import (
    JOB_EVENTS,
    OCC_EVENTS,
    TREE_EVENTS,
    Fold,
    Job,
    Occupancy,
    add_sums_to,
    spec_json,
)
from projections.quotas.rollup_builds import extend_rollups
from projections.quotas.rollups import mark_changed
from projections.quotas.tables import (
    quota_change_days,
    quota_change_hours,
    quota_changes,
    quota_jobs,
    quota_nodes,
    quota_occupancies,
    quota_own_usage,
    quota_rollup_hours,
    quota_rollup_rows,
    quota_rollup_state,
    quota_tree_history,
    quota_workloads,
    quota_workspaces,
)

__all__ = ["QuotaProjection"]


_RAW_TYPES = [(n, "bigint") for n in RAW]


def _add_sums(
    cur: Any,
    table: str,
    columns: Sequence[tuple[str, str]],
    rows: Sequence[tuple[Any, ...]],
    *,
    key: int,
    also: str = "",
) -> None:
    """Add ``rows``' RAW figures to ``table``'s, inserting the keys it lacks, in one
    statement (``columns``: name and type of each value, in row order, the first ``key``
    of them the key). Keys must be unique within ``rows``.
    """
    if not rows:
        return
    names = [n for n, _ in columns]
    arrays = ", ".join(f"%s::{t}[]" for _, t in columns)
    added = [f"{n} = {table}.{n} + EXCLUDED.{n}" for n in RAW]
    if also:
        added.append(also)
    cur.execute(
        f"INSERT INTO {table} ({', '.join(names)}) SELECT * FROM unnest({arrays}) "
        f"ON CONFLICT ({', '.join(names[:key])}) DO UPDATE SET {', '.join(added)}",
        [list(column) for column in zip(*rows, strict=True)],
    )


def _named(events: Sequence[RecordedEvent]) -> tuple[set[str], set[str]]:
    """The job uids and the occupancy ids ``events`` name: the fold state a page needs."""
    uids: set[str] = set()
    occupancies: set[str] = set()
    for event in events:
        data = event.data
        uid = data.get("job_uid")
        if isinstance(uid, str):
            uids.add(uid)
        if event.type in OCC_EVENTS:
            occupancies.add(data["occupancy_id"])
    return uids, occupancies


class QuotaProjection(Projection):
    """Folds quota, workspace, job and occupancy events into the quota tables."""

    name = "quotas"
    cost = 3.9
    tables = (
        quota_rollup_state,
        quota_rollup_rows,
        quota_rollup_hours,
        quota_changes,
        quota_change_days,
        quota_change_hours,
        quota_own_usage,
        quota_occupancies,
        quota_jobs,
        quota_tree_history,
        quota_workspaces,
        quota_nodes,
        quota_workloads,
    )
    event_types = TREE_EVENTS | JOB_EVENTS | OCC_EVENTS | {"WorkloadCreated"}

    def apply(self, uow: UnitOfWork, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        fold = self._load(conn, *_named(events))
        workloads: dict[str, str] = {}
        for event in events:
            if event.type == "WorkloadCreated":
                # a workload's kind, for usage split by kind; its replicas' pods are its job
                workloads.setdefault(event.data["job_uid"], event.data.get("workload", "service"))
                continue
            fold.apply(event.type, event.data, event.occurred_at, event.position)
        fold.job_changes()
        self._save(conn, fold)
        if workloads:
            with driver(conn).cursor() as cur:
                cur.executemany(
                    "INSERT INTO quota_workloads (job_uid, workload) VALUES (%s, %s) "
                    "ON CONFLICT (job_uid) DO NOTHING",
                    sorted(workloads.items()),
                )

    def maintain(self, conn: Connection) -> bool:
        return extend_rollups(conn)

    @staticmethod
    def _load(conn: Connection, uids: set[str], occupancies: set[str]) -> Fold:
        specs: dict[str, QuotaSpec] = {}
        created: dict[str, tuple[datetime, datetime, int]] = {}
        for row in conn.execute(select(quota_nodes)):
            specs[row.quota_id] = QuotaSpec.model_validate(row.spec)
            created[row.quota_id] = (row.created_at, row.changed_at, row.position)
        bindings = {
            row.workspace: (row.quota, row.bound_at, row.position)
            for row in conn.execute(select(quota_workspaces))
        }
        # columns in Job's and Occupancy's field order
        jobs = {row[0]: Job(*row) for row in take_rows(conn, quota_jobs, "job_uid", uids)}
        # only a pod's own events read its row (a job's rows would rewrite its ended pods)
        occs = {
            row[0]: Occupancy(*row)
            for row in take_rows(conn, quota_occupancies, "occupancy_id", occupancies)
        }
        return Fold(specs, created, bindings, jobs, occs)

    @staticmethod
    def _save(conn: Connection, fold: Fold) -> None:
        if fold.tree_changed:  # a tree is tens of nodes: rewrite it
            conn.execute(quota_nodes.delete())
            upsert_rows(
                conn,
                quota_nodes,
                [
                    (q, fold.specs[q].parent, spec_json(fold.specs[q]), *fold.created[q])
                    for q in sorted(fold.specs)
                ],
                key=["quota_id"],
            )
            copy_table(conn, quota_tree_history, fold.tree_rows)
        if fold.bindings_changed:
            conn.execute(quota_workspaces.delete())
            upsert_rows(
                conn,
                quota_workspaces,
                [(ws, *fold.bindings[ws]) for ws in sorted(fold.bindings)],
                key=["workspace"],
            )
        # everything taken out in _load goes back, folded
        copy_table(conn, quota_jobs, [fold.jobs[uid].row() for uid in sorted(fold.jobs)])
        copy_table(conn, quota_occupancies, [fold.occs[o].row() for o in sorted(fold.occs)])
        rows = []
        # (hours since the epoch, quota, flavor) -> the page's RAW sums, then its first instant
        hours: dict[tuple[int, str, str], list[Any]] = {}
        for (at, quota), (position, per) in fold.changes.items():
            nonzero = {flavor: v for flavor, v in per.items() if any(v)}
            if not nonzero:
                continue
            # jsonb keeps its own key order: no need to sort them here
            rows.append((at, position, quota, orjson.dumps(nonzero)))
            hour = hour_index(at)
            for flavor, v in nonzero.items():
                add_sums_to(hours, (hour, quota, flavor), v, at)
        copy_table(conn, quota_changes, rows)
        earliest = [row[0] for row in rows] + [row[0] for row in fold.tree_rows]
        if earliest:
            mark_changed(conn, min(earliest))
        days: dict[tuple[int, str, str], list[Any]] = {}
        totals: dict[tuple[str, str], list[Any]] = {}
        for (hour, quota, flavor), sums in hours.items():
            add_sums_to(days, (day_first_hour(hour), quota, flavor), sums, sums[5])
            add_sums_to(totals, (quota, flavor), sums, sums[5])
        if totals:  # add the page's sums to the running totals and to the hours' and days' sums
            with driver(conn).cursor() as cur:
                _add_sums(
                    cur,
                    "quota_own_usage",
                    [
                        ("quota", "text"),
                        ("flavor", "text"),
                        *_RAW_TYPES,
                        ("first_at", "timestamptz"),
                    ],
                    [(*k, *v) for k, v in sorted(totals.items())],
                    key=2,
                    also="first_at = least(quota_own_usage.first_at, EXCLUDED.first_at)",
                )
                for table, column, sums_by in (("hours", "hour", hours), ("days", "day", days)):
                    _add_sums(
                        cur,
                        f"quota_change_{table}",
                        [
                            (column, "timestamptz"),
                            ("quota", "text"),
                            ("flavor", "text"),
                            *_RAW_TYPES,
                        ],
                        [(hour_start(h), q, f, *v[:5]) for (h, q, f), v in sorted(sums_by.items())],
                        key=3,
                    )
