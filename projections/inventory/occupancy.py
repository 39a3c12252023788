"""Occupancy intervals: which pod held which resources, where, from when to when.

One row per occupancy id (a pod bound to a node, DESIGN §5), opened by
OccupancyStarted and closed by OccupancyEnded. Intervals are half-open
``[started_at, ended_at)``; a GiST index on that range makes "what was occupied
at T" one index probe however long the history grows.

Edge cases, decided once: an end recorded before its start is kept (columns of
the start stay empty) and completed when the start arrives; a second end only
replaces an *estimated* one; an end earlier than the start is clamped to the
start (a zero-length interval), so the range is always valid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Connection,
    DateTime,
    Index,
    Table,
    Text,
    func,
    literal_column,
    text,
)

from ledger.errors import Invalid
from ledger.store.base import RecordedEvent, UnitOfWork
from ledger.store.schema import metadata
from projections.base import Projection
from projections.bulk import copy_table, take_rows
from projections.pages import MAX_REPORT_ROWS, check_report_rows

__all__ = ["GROUP_KEYS", "OccupancyProjection", "jobs_holding_at", "occupancy", "occupied_at"]

_TS = DateTime(timezone=True)

occupancy = Table(
    "occupancy",
    metadata,
    Column("occupancy_id", Text, primary_key=True),
    Column("job_uid", Text, nullable=False),
    Column("pod_uid", Text, nullable=False),
    Column("pod_name", Text),
    Column("node", Text),
    Column("flavor", Text),
    Column("mgpu", BigInteger),
    Column("cpu_milli", BigInteger),
    Column("memory_mib", BigInteger),
    Column("billing_mode", Text),
    Column("workspace", Text),
    Column("quota", Text),
    Column("user", Text),
    Column("started_at", _TS),
    Column("ended_at", _TS),
    Column("end_reason", Text),
    Column("estimated", Boolean, nullable=False),
    Column("start_position", BigInteger),
    Column("end_position", BigInteger),
    CheckConstraint(
        "started_at IS NULL OR ended_at IS NULL OR ended_at >= started_at",
        name="occupancy_interval_ordered",
    ),
    Index("occupancy_job", "job_uid"),
    # "what was occupied at T": a GiST range index answers [start, end) @> T directly
    Index(
        "occupancy_during",
        func.tstzrange(text("started_at"), text("ended_at"), literal_column("'[)'")),
        postgresql_using="gist",
        postgresql_where=text("started_at IS NOT NULL"),
    ),
)

#: Columns ``occupied_at`` may group by.
GROUP_KEYS = ("workspace", "quota", "flavor", "billing_mode", "user", "node", "job_uid")


@dataclass(slots=True)
class _Occupancy:
    occupancy_id: str
    job_uid: str
    pod_uid: str
    pod_name: str | None = None
    node: str | None = None
    flavor: str | None = None
    mgpu: int | None = None
    cpu_milli: int | None = None
    memory_mib: int | None = None
    billing_mode: str | None = None
    workspace: str | None = None
    quota: str | None = None
    user: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    end_reason: str | None = None
    estimated: bool = False
    start_position: int | None = None
    end_position: int | None = None

    def clamp(self) -> None:
        if self.started_at and self.ended_at and self.ended_at < self.started_at:
            self.ended_at = self.started_at

    def row(self) -> tuple[Any, ...]:
        """The occupancy row, columns in table order (dataclasses.astuple deep-copies: slow)."""
        return (
            self.occupancy_id,
            self.job_uid,
            self.pod_uid,
            self.pod_name,
            self.node,
            self.flavor,
            self.mgpu,
            self.cpu_milli,
            self.memory_mib,
            self.billing_mode,
            self.workspace,
            self.quota,
            self.user,
            self.started_at,
            self.ended_at,
            self.end_reason,
            self.estimated,
            self.start_position,
            self.end_position,
        )


class OccupancyProjection(Projection):
    name = "occupancy"
    cost = 2.0
    tables = (occupancy,)
    event_types = frozenset({"OccupancyStarted", "OccupancyEnded"})

    def apply(self, uow: UnitOfWork, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        ids = {e.data["occupancy_id"] for e in events if e.type in self.event_types}
        if not ids:
            return
        # columns in _Occupancy's field order (= table order): a row constructs it positionally
        rows = {r[0]: _Occupancy(*r) for r in take_rows(conn, occupancy, "occupancy_id", ids)}
        for event in events:
            kind = event.type
            data = event.data
            if kind == "OccupancyStarted":
                occ_id = data["occupancy_id"]
                row = rows.get(occ_id)
                if row is None:
                    row = rows[occ_id] = _Occupancy(occ_id, data["job_uid"], data["pod_uid"])
                elif row.started_at is not None:
                    continue  # the first start stands
                row.job_uid = data["job_uid"]
                row.pod_uid = data["pod_uid"]
                row.pod_name = data.get("pod_name", "")
                row.node = data.get("node", "")
                row.flavor = data.get("flavor", "gpu/any")
                row.mgpu = data["mgpu"]
                row.cpu_milli = data["cpu_milli"]
                row.memory_mib = data["memory_mib"]
                row.billing_mode = data.get("billing_mode", "public")
                row.workspace = data["workspace"]
                row.quota = data.get("quota")
                row.user = data.get("user", "unknown")
                row.started_at = datetime.fromisoformat(data["started_at"])
                row.start_position = event.position
            elif kind == "OccupancyEnded":
                occ_id = data["occupancy_id"]
                row = rows.get(occ_id)
                if row is None:
                    row = rows[occ_id] = _Occupancy(occ_id, data["job_uid"], data["pod_uid"])
                elif row.ended_at is not None and not row.estimated:
                    continue  # the first real end stands
                row.ended_at = datetime.fromisoformat(data["ended_at"])
                row.end_reason = data.get("reason", "completed")
                row.estimated = bool(data.get("estimated", False))
                row.end_position = event.position
            else:
                continue
            row.clamp()
        # every row taken out above goes back, with those the page created
        copy_table(conn, occupancy, [rows[i].row() for i in sorted(rows)])


def jobs_holding_at(conn: Connection, at: datetime) -> set[str]:
    """The jobs with a pod occupying at instant ``at`` (half-open intervals): one probe
    of the ``occupancy_during`` index."""
    return set(
        conn.execute(
            text(
                "SELECT DISTINCT job_uid FROM occupancy WHERE started_at IS NOT NULL "
                "AND tstzrange(started_at, ended_at, '[)') @> CAST(:at AS timestamptz)"
            ),
            {"at": at},
        ).scalars()
    )


def occupied_at(conn: Connection, at: datetime, group_by: Sequence[str]) -> list[dict[str, Any]]:
    """Resources occupied at instant ``at`` (half-open intervals), summed per group.

    Rows carry the group keys plus ``mgpu``, ``cpu_milli``, ``memory_mib`` and
    ``jobs`` (distinct jobs), ordered by the group keys. A pod's ``quota`` is its job's,
    as the quota projection resolved it (the job's own, else its workspace's binding at
    submission; ``-``: none), the pod's label only where that projection has no row.
    """
    unknown = [g for g in group_by if g not in GROUP_KEYS]
    if unknown or not group_by:
        raise Invalid(
            f"cannot group by {', '.join(unknown) or 'nothing'}; "
            f"choose from {', '.join(GROUP_KEYS)}"
        )
    keys = ", ".join(f'"{g}"' for g in group_by)
    quota = "o.quota"
    join = ""
    if "quota" in group_by:
        quota = "coalesce(q.quota, o.quota)"
        join = "LEFT JOIN quota_occupancies q ON q.occupancy_id = o.occupancy_id"
    result = conn.execute(
        text(
            f"""
            SELECT {keys},
                   sum(mgpu)::bigint AS mgpu,
                   sum(cpu_milli)::bigint AS cpu_milli,
                   sum(memory_mib)::bigint AS memory_mib,
                   count(DISTINCT job_uid) AS jobs
            FROM (
                SELECT o.workspace, {quota} AS quota, o.flavor, o.billing_mode, o."user",
                       o.node, o.job_uid, o.mgpu, o.cpu_milli, o.memory_mib
                FROM occupancy o {join}
                WHERE o.started_at IS NOT NULL
                  AND tstzrange(o.started_at, o.ended_at, '[)') @> CAST(:at AS timestamptz)
            ) occupied
            GROUP BY {keys}
            ORDER BY {keys}
            LIMIT :cap
            """
        ),
        {"at": at, "cap": MAX_REPORT_ROWS + 1},
    )
    rows = [dict(r._mapping) for r in result]
    check_report_rows(len(rows), hint="group by fewer or coarser keys (workspace, flavor)")
    return rows
