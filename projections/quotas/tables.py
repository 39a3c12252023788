"""The quota read model's tables (SQLAlchemy Core), mirroring migrations ``0003_quotas``,
``0006_quota_changes``, ``0009_quota_change_hours``, ``0010_quota_change_days``,
``0013_quota_job_intervals`` and ``0021_quota_rollups``; what each holds:
:mod:`projections.quotas.projection` and :mod:`projections.quotas.rollups`."""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, DateTime, SmallInteger, Table, Text
from sqlalchemy.dialects.postgresql import JSONB

from ledger.store.schema import metadata
from ledger.usage_boards import NUMBERS, RAW

__all__ = [
    "quota_change_days",
    "quota_change_hours",
    "quota_changes",
    "quota_jobs",
    "quota_nodes",
    "quota_occupancies",
    "quota_own_usage",
    "quota_rollup_hours",
    "quota_rollup_rows",
    "quota_rollup_state",
    "quota_tree_history",
    "quota_workloads",
    "quota_workspaces",
]

_TS = DateTime(timezone=True)

quota_nodes = Table(
    "quota_nodes",
    metadata,
    Column("quota_id", Text, primary_key=True),
    Column("parent", Text),
    Column("spec", JSONB, nullable=False),
    Column("created_at", _TS, nullable=False),
    Column("changed_at", _TS, nullable=False),
    Column("position", BigInteger, nullable=False),
)
quota_workspaces = Table(
    "quota_workspaces",
    metadata,
    Column("workspace", Text, primary_key=True),
    Column("quota", Text, nullable=False),
    Column("bound_at", _TS, nullable=False),
    Column("position", BigInteger, nullable=False),
)
quota_tree_history = Table(
    "quota_tree_history",
    metadata,
    Column("at", _TS, primary_key=True),
    Column("position", BigInteger, primary_key=True),
    Column("quota_id", Text, primary_key=True),
    Column("spec", JSONB),  # null: deleted
)
quota_jobs = Table(
    "quota_jobs",
    metadata,
    Column("job_uid", Text, primary_key=True),
    Column("workspace", Text),
    Column("quota", Text, nullable=False),
    Column("billing_mode", Text, nullable=False),
    Column("requested", JSONB, nullable=False),
    Column("submitted_at", _TS, nullable=False),
    Column("submitted", Boolean, nullable=False),  # its JobSubmitted seen (else: a pod's)
    Column("ended_at", _TS),  # its first end (JobSucceeded / Failed / Stopped / Deleted)
    # {occupancy id: [start, end or null]} in microseconds since the epoch: the job's
    # intervals, from which its queued / running timeline is derived
    Column("occupied", JSONB, nullable=False),
)
quota_occupancies = Table(
    "quota_occupancies",
    metadata,
    Column("occupancy_id", Text, primary_key=True),
    Column("job_uid", Text, nullable=False),
    Column("quota", Text, nullable=False),
    Column("idle", Boolean, nullable=False),
    Column("resources", JSONB, nullable=False),
    Column("open", Boolean, nullable=False),
    Column("started_at", _TS),
    Column("ended_at", _TS),
)
#: The services and notebooks among the jobs (migration 0026): usage split by kind reads
#: a pod's job here (absent: a training job).
quota_workloads = Table(
    "quota_workloads",
    metadata,
    Column("job_uid", Text, primary_key=True),
    Column("workload", Text, nullable=False),  # service | notebook
)
quota_changes = Table(
    "quota_changes",
    metadata,
    Column("at", _TS, primary_key=True),
    Column("position", BigInteger, primary_key=True),
    Column("quota", Text, nullable=False),
    # {flavor: [used, idle_used, queued, running_jobs, queued_jobs]}: one row per change
    # point (instant and quota within a page), not per event and flavor
    Column("changes", JSONB, nullable=False),
)


# the changes summed per UTC hour and per UTC day: an instant's usage is then the days
# before its own, its day's hours before its own and at most one hour of change rows, not
# every change row on one side of it
def _change_sums(name: str, period: str) -> Table:
    return Table(
        name,
        metadata,
        Column(period, _TS, primary_key=True),
        Column("quota", Text, primary_key=True),
        Column("flavor", Text, primary_key=True),
        *(Column(n, BigInteger, nullable=False) for n in RAW),
    )


quota_change_hours = _change_sums("quota_change_hours", "hour")
quota_change_days = _change_sums("quota_change_days", "day")
quota_own_usage = Table(
    "quota_own_usage",
    metadata,
    Column("quota", Text, primary_key=True),
    Column("flavor", Text, primary_key=True),
    *(Column(n, BigInteger, nullable=False) for n in RAW),
    # the key's first change: reading an instant subtracts the changes after it from
    # these totals, and a key first changed after that instant must not show
    Column("first_at", _TS, nullable=False),
)

# the settled rows at each hour something changed, up to the state's ``valid_before``
quota_rollup_hours = Table("quota_rollup_hours", metadata, Column("hour", _TS, primary_key=True))
quota_rollup_rows = Table(
    "quota_rollup_rows",
    metadata,
    Column("hour", _TS, primary_key=True),
    Column("quota", Text, primary_key=True),
    Column("flavor", Text, primary_key=True),
    *(Column(n, BigInteger, nullable=False) for n in NUMBERS),
)
quota_rollup_state = Table(
    "quota_rollup_state",
    metadata,
    Column("id", SmallInteger, primary_key=True),
    Column("valid_before", _TS),
    Column("complete", Boolean, nullable=False),
)
