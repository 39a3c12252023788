"""Reading the jobs read model: ``jobs list`` (paged, optionally as at an instant),
a job found by uid or name, its detail, and its timeline with late arrivals flagged."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, and_, func, or_, select, text, union

from ledger.canonical import format_timestamp
from ledger.errors import Invalid, NotFound
from ledger.store.base import UnitOfWork
from projections.billing import job_cost
from projections.jobs.as_at import as_at, existed_by
from projections.jobs.fold import STATUSES, fold_order, parse_time
from projections.jobs.projection import JobsProjection
from projections.jobs.tables import job_state, job_timeline, job_workspace_quotas
from projections.jobs.timeline import named_jobs, summary, timeline_row
from projections.pages import check_limit, decode_cursor, encode_cursor
from projections.steps import checkpoint_name

__all__ = [
    "JobPage",
    "find_job",
    "job_detail",
    "jobs_by_uid",
    "late_flags",
    "list_jobs",
    "timeline_entries",
    "timeline_rows",
]

_NEVER = datetime(1, 1, 1, tzinfo=UTC)  # sorts a job with no submission last


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _job_dict(row: Any) -> dict[str, Any]:
    m = dict(row._mapping)
    hidden = (
        "running_since",
        "open_occupancies",
        "last_position",
        "events",
        "running_us",
        "fold_at",
        "fold_rank",
        "fold_position",
        "transitions",
    )
    out = {k: _jsonable(v) for k, v in m.items() if k not in hidden}
    out["running_seconds"] = _jsonable(Decimal(m["running_us"]) / 1_000_000)
    out["open_occupancies"] = len(m["open_occupancies"])
    return out


@dataclass(frozen=True)
class JobPage:
    """One page of :func:`list_jobs`; ``next_cursor`` continues it (None: the last page)."""

    jobs: list[dict[str, Any]]
    next_cursor: str | None


def _encode_cursor(submitted_at: datetime | None, uid: str) -> str:
    return encode_cursor([format_timestamp(submitted_at) if submitted_at else None, uid])


def _decode_cursor(cursor: str) -> tuple[datetime | None, str]:
    submitted, uid = decode_cursor(cursor, (str, type(None)), str)
    try:
        return (parse_time(submitted) if submitted else None), uid
    except ValueError as exc:
        raise Invalid(
            f"invalid cursor {cursor[:40]!r}: pass the one a previous page printed"
        ) from exc


def list_jobs(
    conn: Connection,
    *,
    workspace: str | None = None,
    status: str | None = None,
    user: str | None = None,
    limit: int = 50,
    at: datetime | None = None,
    cursor: str | None = None,
    workspaces: Collection[str] | None = None,
    q: str | None = None,
    frameworks: Collection[str] | None = None,
) -> JobPage:
    """Jobs, newest submission first, filtered, one page; JSON-ready dicts.

    ``q``: jobs whose name holds it, or whose uid starts with it (case-insensitive; ``%``
    and ``_`` are plain characters), for a search box.

    ``at`` (cluster time): only jobs that existed then, with their status, running time
    and end as of that instant (``status`` filters on it). Pages are keyed on
    (submission, uid), so a page never repeats or skips a job while new ones arrive.
    ``workspaces``: a caller's scope (an API token's workspace roles), in the WHERE.
    ``frameworks``: only these (``service``, ``notebook``: the workloads of
    docs/workloads.md; ``pytorch``, ``none`` ...: training jobs).
    """
    if status is not None and status not in STATUSES:
        raise Invalid(f"unknown status {status!r}; one of {', '.join(STATUSES)}")
    check_limit(limit)
    submitted = func.coalesce(job_state.c.submitted_at, _NEVER)
    query = job_state.select()
    if workspace is not None:
        query = query.where(job_state.c.workspace == workspace)
    if workspaces is not None:
        query = query.where(job_state.c.workspace.in_(sorted(workspaces)))
    if user is not None:
        query = query.where(job_state.c.user == user)
    if frameworks is not None:
        query = query.where(job_state.c.framework.in_(sorted(frameworks)))
    if q:
        text_q = _like_literal(q)
        query = query.where(
            or_(
                job_state.c.name.ilike(f"%{text_q}%", escape="\\"),
                job_state.c.job_uid.ilike(f"{text_q}%", escape="\\"),
            )
        )
    if status is not None and at is None:
        query = query.where(job_state.c.status == status)
    if at is not None:
        # the first transition is the job's first fact: later ones did not exist yet
        query = query.where(existed_by(at))
    if cursor is not None:
        after_submitted, after_uid = _decode_cursor(cursor)
        key = after_submitted or _NEVER
        query = query.where(
            or_(submitted < key, and_(submitted == key, job_state.c.job_uid > after_uid))
        )
    query = query.order_by(submitted.desc(), job_state.c.job_uid)
    jobs: list[dict[str, Any]] = []
    last: Any = None
    # with ``at`` and ``status`` the status filter is applied after the rewrite: read on.
    # The option is the statement's: on the connection it would stay set (SQLAlchemy 2
    # changes a connection's options in place), and the caller's next reads would each
    # open a server-side cursor, which a ``SET`` cannot run in.
    for row in conn.execute(query.execution_options(yield_per=limit)):
        job = _job_dict(row)
        if at is not None:
            as_at(job, row.transitions, at)
            if status is not None and job["status"] != status:
                continue
        if len(jobs) == limit:
            return JobPage(jobs, _encode_cursor(last.submitted_at, last.job_uid))
        jobs.append(job)
        last = row
    return JobPage(jobs, None)


def jobs_by_uid(
    conn: Connection, uids: Collection[str], *, workspaces: Collection[str] | None = None
) -> dict[str, dict[str, Any]]:
    """The jobs of ``uids`` as :func:`list_jobs` shows them, by uid (one indexed read; a
    uid unknown, or outside ``workspaces``, is absent)."""
    query = job_state.select().where(job_state.c.job_uid.in_(sorted(set(uids))))
    if workspaces is not None:
        query = query.where(job_state.c.workspace.in_(sorted(workspaces)))
    return {row.job_uid: _job_dict(row) for row in conn.execute(query)}


def _like_literal(value: str) -> str:
    """``value`` matched literally inside a LIKE pattern (escape character ``\\``)."""
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def find_job(conn: Connection, ref: str, *, workspaces: Collection[str] | None = None) -> str:
    """The uid of job ``ref`` (a uid, or a name that only one job carries); with
    ``workspaces`` (a caller's scope) a job outside them is not found."""
    jobs = job_state.select()
    if workspaces is not None:
        jobs = jobs.where(job_state.c.workspace.in_(sorted(workspaces)))
    if conn.execute(jobs.where(job_state.c.job_uid == ref)).first():
        return ref
    uids = [
        row.job_uid
        for row in conn.execute(
            jobs.where(job_state.c.name == ref).order_by(job_state.c.submitted_at)
        )
    ]
    if not uids:
        raise NotFound(f"no job with uid or name {ref!r}")
    if len(uids) > 1:
        raise Invalid(f"name {ref!r} is ambiguous, {len(uids)} jobs: {', '.join(uids)}")
    return str(uids[0])


def job_detail(
    uow: UnitOfWork, uid: str, *, workspaces: Collection[str] | None = None
) -> dict[str, Any]:
    """One job: state, occupied resource-seconds per flavor (closed occupancies), timeline,
    read in ``uow`` (a :meth:`~ledger.store.base.EventStore.snapshot`: one view of all).

    ``workspaces`` (a caller's scope, which the job is in): the preemption decisions on
    its timeline do not name the jobs of other workspaces they involve."""
    conn: Connection = uow.connection
    row = conn.execute(job_state.select().where(job_state.c.job_uid == uid)).first()
    if row is None:
        raise NotFound(f"no job with uid {uid!r}")
    detail = _job_dict(row)
    usage = conn.execute(
        text(
            """
            SELECT flavor,
                   sum(mgpu * extract(epoch FROM ended_at - started_at)) AS mgpu_seconds,
                   sum(cpu_milli * extract(epoch FROM ended_at - started_at)) AS cpu_milli_seconds,
                   sum(memory_mib * extract(epoch FROM ended_at - started_at))
                     AS memory_mib_seconds,
                   count(*) AS occupancies
            FROM occupancy
            WHERE job_uid = :uid AND started_at IS NOT NULL AND ended_at IS NOT NULL
            GROUP BY flavor ORDER BY flavor
            """
        ),
        {"uid": uid},
    )
    detail["occupied"] = [{k: _jsonable(v) for k, v in u._mapping.items()} for u in usage]
    detail["timeline"] = timeline_entries(uow, uid, workspaces=workspaces)
    # cost per flavor x billing mode, posted and rated (billing read model; precise
    # amounts as decimal strings, never floats)
    detail["cost"] = [
        {k: str(v) if isinstance(v, Decimal) else v for k, v in r.items()}
        for r in job_cost(conn, uid)
    ]
    return detail


_TIMELINE_COLUMNS = tuple(c.name for c in job_timeline.columns)


def timeline_entries(
    uow: UnitOfWork, uid: str, *, workspaces: Collection[str] | None = None
) -> list[dict[str, Any]]:
    """Job ``uid``'s timeline as ``jobs show`` and ``/v1/jobs/{uid}`` (and its
    ``/timeline`` list) show it: JSON-ready entries in cluster-time order, each flagged
    ``late`` or not; ``workspaces`` (a caller's scope, which the job is in): preemption
    decisions do not name the jobs of other workspaces."""
    rows = timeline_rows(uow, uid)
    if workspaces is not None:
        rows = _unname_outsiders(uow, uid, rows, workspaces)
    return [
        {k: _jsonable(v) for k, v in zip(_TIMELINE_COLUMNS, row, strict=True) if k != "job_uid"}
        | {"event_id": str(row[-1]), "late": late}
        for row, late in zip(rows, late_flags(rows), strict=True)
    ]


_OUTSIDER = "(a job of another workspace)"


def _unname_outsiders(
    uow: UnitOfWork, uid: str, rows: list[tuple[Any, ...]], workspaces: Collection[str]
) -> list[tuple[Any, ...]]:
    """``rows`` with the preemption decisions summarised, and their ``by`` given, without
    the uids of jobs outside ``workspaces`` (a preemptor or fellow victim of another team:
    who they are is that team's)."""
    decisions = {int(r[1]) for r in rows if r[3] == "PreemptionDecided"}
    if not decisions:
        return rows
    events = {e.position: e for e in uow.read_positions(sorted(decisions))}
    named = {
        str(u)
        for e in events.values()
        for u in [e.data.get("preemptor"), *(v.get("job_uid") for v in e.data.get("victims", ()))]
        if u
    }
    s = job_state.c
    visible = set(
        uow.connection.execute(
            select(s.job_uid).where(
                s.job_uid.in_(sorted(named)), s.workspace.in_(sorted(workspaces))
            )
        ).scalars()
    )

    def shown(job: Any) -> Any:
        return job if job is None or job in visible else _OUTSIDER

    out = []
    for row in rows:
        event = events.get(int(row[1])) if row[3] == "PreemptionDecided" else None
        if event is None:
            out.append(row)
            continue
        data = dict(event.data)
        data["preemptor"] = shown(data.get("preemptor"))
        data["victims"] = [
            {**v, "job_uid": shown(v.get("job_uid"))} for v in data.get("victims", ())
        ]
        unnamed = timeline_row(event, uid, shown(row[6]), row[7])
        out.append((*unnamed[:4], summary(event.type, data, uid), *unnamed[5:]))
    return out


def timeline_rows(uow: UnitOfWork, uid: str) -> list[tuple[Any, ...]]:
    """Job ``uid``'s timeline as of the projection's checkpoint: ``job_timeline`` rows in
    table order, in :func:`fold_order` (cluster time).

    The events of the job's own stream come from the store itself (append-only, indexed
    by stream), read up to the checkpoint so they match ``job_state``; the table holds
    only the events about the job recorded elsewhere (decisions, another job's stream).
    """
    conn: Connection = uow.connection
    upto = uow.load_checkpoint(checkpoint_name(JobsProjection())).position
    stored = conn.execute(
        job_timeline.select().where(job_timeline.c.job_uid == uid, job_timeline.c.position <= upto)
    )
    rows: list[tuple[Any, ...]] = [tuple(r) for r in stored]  # in order once merged below
    quota = conn.execute(select(job_state.c.quota).where(job_state.c.job_uid == uid)).scalar()
    for event in uow.read_stream(f"job/{uid}", upto=upto):
        by, reason = next((b, r) for u, b, r in named_jobs(event) if u == uid)
        rows.append(timeline_row(event, uid, by, reason, quota))
    rows.sort(key=lambda r: fold_order(r[2], r[3], int(r[1])))
    return rows


def late_flags(rows: Sequence[tuple[Any, ...]]) -> list[bool]:
    """For timeline ``rows`` in cluster-time order: was each fact stored after a fact
    that happened strictly later (it arrived late)? Facts of one instant are not late
    for each other, whatever order they were stored in."""
    flags = [False] * len(rows)
    lowest_after: int | None = None  # lowest position among facts of later instants
    end = len(rows)
    while end > 0:
        start = end - 1
        while start > 0 and rows[start - 1][2] == rows[end - 1][2]:
            start -= 1
        positions = [int(rows[i][1]) for i in range(start, end)]
        for i, position in zip(range(start, end), positions, strict=True):
            flags[i] = lowest_after is not None and position > lowest_after
        lowest = min(positions)
        lowest_after = lowest if lowest_after is None else min(lowest_after, lowest)
        end = start
    return flags


def known_workspaces(conn: Connection) -> frozenset[str]:
    """The workspaces the ledger knows: bound to a quota, or where a job was submitted."""
    s, b = job_state.c, job_workspace_quotas.c
    rows = conn.execute(
        union(select(b.workspace), select(s.workspace).where(s.workspace.is_not(None)).distinct())
    )
    return frozenset(row[0] for row in rows if row[0])
