"""Reading quota usage: the figures at an instant, and the change points of a window.

The quota projection (:mod:`projections.quotas.projection`) stores raw per-leaf changes stamped
with cluster time; here they become rows. At an instant: the changes up to it summed
per leaf, under the tree in force then (its changes up to the instant, in cluster-time
order), through :class:`~ledger.usage_boards.UsageBoard`. Over a window: the state at
its start, then the changes instant by instant, each instant's rows compared with the
previous ones, so only what changed becomes a change point. Either way the answer
depends on what happened when, never on the order the events arrived in. Changes are
stored under the flavor they were recorded with; the board counts ``gpu/<model>`` under
``gpu/any`` where the tree in force does not name the model for the quota, so a read
narrowed to ``gpu/any`` reads the models' changes too (:func:`_recorded`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, select, text

from ledger.errors import Invalid
from ledger.events import QuotaSpec
from ledger.quotas import QuotaTree, counting_flavors, topological_order
from ledger.usage_boards import NUMBERS, RAW, Key, Numbers, UsageBoard
from projections.pages import MAX_REPORT_ROWS, check_report_rows
from projections.quotas.buckets import day_of, hour_of
from projections.quotas.rollups import rollup_series
from projections.quotas.tables import quota_nodes, quota_workspaces

__all__ = [
    "CHANGE_SUMS",
    "STEPS",
    "UsageRow",
    "board_walk",
    "quota_tree",
    "series_points",
    "specs_at",
    "usage_at",
    "usage_history",
    "usage_series",
]

_RAW_COLS = ", ".join(RAW)
_HOUR = timedelta(hours=1)
_DAY = timedelta(days=1)
_NARROW_SERIES = "narrow --from/--to, use a longer --step, or name a --quota or --flavor"
_NARROW_CHANGES = "narrow --from/--to, use --step day or hour, or name a --quota or --flavor"
_OUTER_SUMS = ", ".join(f"sum({n})::bigint AS {n}" for n in RAW)  # of RAW-named columns
#: SQL select list: the raw changes of ``jsonb_each(changes) d`` summed, one column per
#: :data:`~ledger.usage_boards.RAW` figure (callers group by what they need)
CHANGE_SUMS = ", ".join(f"sum((d.value->>{i})::bigint)::bigint AS {n}" for i, n in enumerate(RAW))


@dataclass(frozen=True, slots=True)
class UsageRow:
    """One quota node x flavor at instant ``at`` (``deleted``: the row went away then)."""

    quota: str
    flavor: str
    at: datetime
    min: int
    max: int
    used: int
    borrowed: int
    lent: int
    queued: int
    running_jobs: int
    queued_jobs: int
    over_admitted: int
    deleted: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "quota": self.quota,
            "flavor": self.flavor,
            "at": self.at,
            **{n: getattr(self, n) for n in NUMBERS},
        }


def _row(key: Key, at: datetime, n: Numbers, *, deleted: bool = False) -> UsageRow:
    return UsageRow(*key, at, n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7], n[8], deleted)


_GONE: Numbers = (0,) * len(NUMBERS)


def quota_tree(conn: Connection) -> QuotaTree:
    """The projected tree (specs and bindings), as ``quotas apply`` diffs against it."""
    specs = {
        row.quota_id: QuotaSpec.model_validate(row.spec)
        for row in conn.execute(select(quota_nodes.c.quota_id, quota_nodes.c.spec))
    }
    bindings = {
        row.workspace: row.quota
        for row in conn.execute(select(quota_workspaces.c.workspace, quota_workspaces.c.quota))
    }
    return QuotaTree(specs=specs, bindings=bindings)


def usage_at(
    conn: Connection, at: datetime | None = None, *, quota: str | None = None
) -> list[UsageRow]:
    """Usage per quota node x flavor at instant ``at`` (latest when None), tree order.

    The latest rows carry the instant of the latest change as ``at``.
    """
    specs = specs_at(conn, at)
    board = UsageBoard(specs)
    if at is None:
        raw = conn.execute(text(f"SELECT quota, flavor, {_RAW_COLS} FROM quota_own_usage"))
        at = conn.execute(
            text(
                "SELECT greatest((SELECT max(at) FROM quota_changes), "
                "(SELECT max(at) FROM quota_tree_history))"
            )
        ).scalar()
        if at is None:
            return []
    else:
        raw = _raw_at(conn, at, None)
    for row in raw:
        board.add(row[0], row[1], row[2:])
    board.settle()
    rank = {q: i for i, q in enumerate(topological_order(specs))}
    keys = sorted(
        (k for k in board.rows if quota is None or k[0] == quota),
        key=lambda k: (rank.get(k[0], len(rank)), k),
    )
    return [_row(key, at, board.rows[key]) for key in keys]


def usage_history(
    conn: Connection,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    quota: str | None = None,
    flavor: str | None = None,
) -> list[UsageRow]:
    """Change points in (``since``, ``until``], in time order, for charts.

    With ``since``, the rows in force at ``since`` come first, stamped ``since``. Then,
    per instant where something changed, the rows that changed (the state at the
    instant's end against the state before it: a pod that starts and ends within one
    instant leaves none), and ``deleted`` rows for the ones that went away (a quota
    deleted, ``-`` back to zero). Flavors are independent but for the models counted as
    ``gpu/any``, so ``flavor`` narrows the changes read to those that may count as it
    (:func:`_recorded`); ``quota`` only filters the output (lending involves the whole
    tree).
    """
    board = UsageBoard(specs_at(conn, since) if since is not None else {})
    recorded = _recorded(conn, flavor)
    wanted = None if recorded is None else frozenset(recorded)
    out: list[UsageRow] = []

    def emit(when: datetime, changed: Mapping[Key, Numbers | None]) -> None:
        for key in sorted(changed):
            if (quota is not None and key[0] != quota) or (flavor is not None and key[1] != flavor):
                continue
            check_report_rows(len(out) + 1, hint=_NARROW_CHANGES)
            numbers = changed[key]
            if numbers is None:
                out.append(_row(key, when, _GONE, deleted=True))
            else:
                out.append(_row(key, when, numbers))

    if since is not None:
        for row in _raw_at(conn, since, recorded):
            board.add(row[0], row[1], row[2:])
        emit(since, board.settle())
    specs = dict(board.specs)
    tree = _tree_changes(conn, since, until)
    pending = 0
    for when, group in itertools.groupby(_changes(conn, since, until, recorded), lambda r: r[0]):
        while pending < len(tree) and tree[pending][0] < when:
            pending = _apply_tree(board, specs, tree, pending)
            emit(tree[pending - 1][0], board.settle())
        if pending < len(tree) and tree[pending][0] == when:
            pending = _apply_tree(board, specs, tree, pending)
        for _, changed_quota, per in group:
            for key, raw in per.items():
                if wanted is None or key in wanted:
                    board.add(changed_quota, key, raw)
        emit(when, board.settle())
    while pending < len(tree):
        pending = _apply_tree(board, specs, tree, pending)
        emit(tree[pending - 1][0], board.settle())
    return out


#: ``usage_series`` steps: their length and the change-sum table that holds one step each
STEPS = {"hour": (_HOUR, "quota_change_hours", "hour"), "day": (_DAY, "quota_change_days", "day")}


def _step_start(at: datetime, step: str) -> datetime:
    return hour_of(at) if step == "hour" else day_of(at)


def series_points(
    conn: Connection, step: str, since: datetime | None, until: datetime | None
) -> list[datetime]:
    """The instants ``usage_series`` reports: every ``step`` start from the step holding
    ``since`` (default: the first change) to the one holding ``until`` (default: the
    latest change)."""
    if step not in STEPS:
        raise Invalid(f"unknown step {step!r}: use {', '.join(STEPS)}")
    if since is None or until is None:
        first, last = conn.execute(
            text(
                "SELECT least((SELECT min(at) FROM quota_changes), "
                "(SELECT min(at) FROM quota_tree_history)), "
                "greatest((SELECT max(at) FROM quota_changes), "
                "(SELECT max(at) FROM quota_tree_history))"
            )
        ).one()
        if first is None:
            return []
        since = since or first
        until = until or last
    length = STEPS[step][0]
    first_step = _step_start(since, step)
    # counted before any is built: a window to 9999 must cost nothing to refuse
    count = (until - first_step) // length + 1
    if count > MAX_REPORT_ROWS:
        raise Invalid(
            f"{count:,} {step}s in the window (at most {MAX_REPORT_ROWS:,}): narrow "
            "--from/--to or use a longer --step"
        )
    points, at = [], first_step
    while at <= until:
        points.append(at)
        at += length
    return points


def usage_series(
    conn: Connection,
    points: list[datetime],
    step: str,
    *,
    quota: str | None = None,
    flavor: str | None = None,
) -> list[UsageRow]:
    """Every quota node x flavor at each of ``points`` (:func:`series_points`), for charts.

    Each point is the state at the step's start, exactly what :func:`usage_at` answers
    for that instant (changes at the instant itself included). The points the hourly
    rollups cover (:mod:`projections.quotas.rollups`) are one range read; the rest are
    derived from the changes (:func:`board_walk`).
    """
    if not points:
        return []
    covered, rows = rollup_series(conn, points, quota=quota, flavor=flavor)
    out = [_row((q, f), at, tuple(n)) for at, q, f, *n in rows]
    check_report_rows(len(out), hint=_NARROW_SERIES)
    rest = points[covered:]
    if not rest:
        return out
    for at, board in board_walk(conn, rest, step, _recorded(conn, flavor)):
        for key in sorted(board.rows):
            if (quota is None or key[0] == quota) and (flavor is None or key[1] == flavor):
                check_report_rows(len(out) + 1, hint=_NARROW_SERIES)
                out.append(_row(key, at, board.rows[key]))
    return out


def board_walk(
    conn: Connection, points: Sequence[datetime], step: str, recorded: Sequence[str] | None
) -> Iterator[tuple[datetime, UsageBoard]]:
    """The board settled at each of ``points`` (ascending ``step`` starts), each exactly
    what :func:`usage_at` derives for that instant (only ``recorded`` flavors' changes,
    when given).

    From the first point on, a point adds the changes of ``(previous, point]``: the
    previous point's row of the per-step sums, less the changes at the previous instant
    itself, plus those at the point, so the change rows are read only at the points,
    never one by one between them. The points need not be evenly spaced as long as no
    step between two of them holds a change (the rollups walk only the hours that do).
    """
    _, table, column = STEPS[step]
    board = UsageBoard(specs_at(conn, points[0]))
    for row in _raw_at(conn, points[0], recorded):
        board.add(row[0], row[1], row[2:])
    board.settle()
    only = " AND flavor = ANY(:flavors)" if recorded is not None else ""
    sums: dict[datetime, list[Any]] = {}
    for row in conn.execute(
        text(
            f"SELECT {column}, quota, flavor, {_RAW_COLS} FROM {table} "
            f"WHERE {column} >= :first AND {column} < :last{only}"
        ),
        {"first": points[0], "last": points[-1], "flavors": recorded},
    ):
        sums.setdefault(row[0], []).append(row[1:])
    exact: dict[datetime, list[Any]] = {}
    for row in conn.execute(
        text(
            f"SELECT c.at, c.quota, d.key, {CHANGE_SUMS} FROM quota_changes c "
            "CROSS JOIN LATERAL jsonb_each(c.changes) d WHERE c.at = ANY(:points)"
            f"{' AND d.key = ANY(:flavors)' if recorded is not None else ''} "
            "GROUP BY c.at, c.quota, d.key"
        ),
        {"points": list(points), "flavors": recorded},
    ):
        exact.setdefault(row[0], []).append(row[1:])
    tree = _tree_changes(conn, points[0], points[-1])
    specs, pending = dict(board.specs), 0
    for i, at in enumerate(points):
        if i:
            previous = points[i - 1]
            for q, f, *raw in sums.get(previous, ()):
                board.add(q, f, raw)
            for q, f, *raw in exact.get(previous, ()):
                board.add(q, f, [-v for v in raw])
            for q, f, *raw in exact.get(at, ()):
                board.add(q, f, raw)
            if pending < len(tree) and tree[pending][0] <= at:
                while pending < len(tree) and tree[pending][0] <= at:
                    pending = _apply_tree(board, specs, tree, pending)
            board.settle()
        yield at, board


def _apply_tree(
    board: UsageBoard,
    specs: dict[str, QuotaSpec],
    tree: list[tuple[datetime, str, QuotaSpec | None]],
    start: int,
) -> int:
    """Apply the tree changes of the instant ``tree[start]`` is at; returns the next index."""
    when = tree[start][0]
    i = start
    while i < len(tree) and tree[i][0] == when:
        _, quota_id, spec = tree[i]
        if spec is None:
            specs.pop(quota_id, None)
        else:
            specs[quota_id] = spec
        i += 1
    board.set_tree(specs)
    return i


def _window(since: datetime | None, until: datetime | None) -> tuple[str, dict[str, Any]]:
    clauses, params = [], {}
    if since is not None:
        clauses.append("at > :since")
        params["since"] = since
    if until is not None:
        clauses.append("at <= :until")
        params["until"] = until
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def _tree_changes(
    conn: Connection, since: datetime | None, until: datetime | None
) -> list[tuple[datetime, str, QuotaSpec | None]]:
    where, params = _window(since, until)
    return [
        (at, quota_id, None if spec is None else QuotaSpec.model_validate(spec))
        for at, quota_id, spec in conn.execute(
            text(f"SELECT at, quota_id, spec FROM quota_tree_history{where} ORDER BY at, position"),
            params,
        )
    ]


def _recorded(conn: Connection, flavor: str | None) -> list[str] | None:
    """The recorded flavors whose changes may count as ``flavor`` (None: all of them):
    ``flavor`` itself, and for ``gpu/any`` every ``gpu/<model>`` recorded
    (:func:`~ledger.quotas.counting_flavors`; the running totals name every key)."""
    if flavor is None:
        return None
    stored = conn.execute(text("SELECT DISTINCT flavor FROM quota_own_usage")).scalars()
    return counting_flavors(flavor, stored)


def _changes(
    conn: Connection,
    since: datetime | None,
    until: datetime | None,
    flavors: Sequence[str] | None,
) -> Iterator[Any]:
    """(at, quota, {flavor: RAW}) in cluster-time order, streamed (only the change rows
    naming one of ``flavors``, when given)."""
    where, params = _window(since, until)
    if flavors is not None:
        where += (" AND " if where else " WHERE ") + "changes ?| CAST(:flavors AS text[])"
        params["flavors"] = list(flavors)
    result = conn.execution_options(stream_results=True, yield_per=10_000).execute(
        text(f"SELECT at, quota, changes FROM quota_changes{where} ORDER BY at, position"),
        params,
    )
    yield from result


def _raw_at(
    conn: Connection,
    at: datetime,
    flavors: Sequence[str] | None,
    *,
    from_end: bool | None = None,
) -> Any:
    """Raw usage per (quota, recorded flavor) at ``at``, for every key changed by then
    (only ``flavors``, when given).

    Either the changes up to ``at`` summed, or the running totals minus the changes
    after it: the same rows, so the side with fewer changes to read is chosen, judged
    by where ``at`` falls between the first and the last change (two index look-ups).
    On the chosen side, whole days come from their sums (``quota_change_days``), the
    whole hours of ``at``'s own day from theirs (``quota_change_hours``), so only the
    change rows of ``at``'s own hour are read one by one. ``from_end`` forces a side
    (tests).
    """
    hour, day = hour_of(at), day_of(at)
    params = {
        "at": at,
        "flavors": None if flavors is None else list(flavors),
        "hour": hour,
        "next_hour": hour + _HOUR,
        "day": day,
        "next_day": day + _DAY,
    }
    if from_end is None:
        first, last = conn.execute(text("SELECT min(at), max(at) FROM quota_changes")).one()
        from_end = first is not None and at - first > last - at
    only = " AND d.key = ANY(:flavors)" if flavors is not None else ""
    sums_only = " AND flavor = ANY(:flavors)" if flavors is not None else ""

    def sums(days: str, hours: str, changes: str) -> str:  # one side of ``at``, per key
        return (
            f"SELECT quota, flavor, {_OUTER_SUMS} FROM ("
            f"SELECT quota, flavor, {_RAW_COLS} FROM quota_change_days "
            f"WHERE {days}{sums_only} UNION ALL "
            f"SELECT quota, flavor, {_RAW_COLS} FROM quota_change_hours "
            f"WHERE {hours}{sums_only} UNION ALL "
            f"SELECT c.quota, d.key, {CHANGE_SUMS} FROM quota_changes c "
            f"CROSS JOIN LATERAL jsonb_each(c.changes) d WHERE {changes}{only} "
            "GROUP BY c.quota, d.key) s GROUP BY quota, flavor"
        )

    if not from_end:
        return conn.execute(
            text(
                sums(
                    "day < :day",
                    "hour >= :day AND hour < :hour",
                    "c.at >= :hour AND c.at <= :at",
                )
            ),
            params,
        )
    after = sums(
        "day >= :next_day",
        "hour >= :next_hour AND hour < :next_day",
        "c.at > :at AND c.at < :next_hour",
    )
    rest = ", ".join(f"u.{n} - coalesce(a.{n}, 0)" for n in RAW)
    keep = " AND u.flavor = ANY(:flavors)" if flavors is not None else ""
    return conn.execute(
        text(
            f"SELECT u.quota, u.flavor, {rest} FROM quota_own_usage u LEFT JOIN ({after}) a "
            f"ON a.quota = u.quota AND a.flavor = u.flavor "
            f"WHERE u.first_at <= :at{keep}"
        ),
        params,
    )


def specs_at(conn: Connection, at: datetime | None) -> dict[str, QuotaSpec]:
    """The tree in force at ``at`` (latest when None): each quota's last spec by cluster
    time (a quota whose last change deleted it is absent)."""
    only = " WHERE at <= :at" if at is not None else ""
    return {
        quota_id: QuotaSpec.model_validate(spec)
        for quota_id, spec in conn.execute(
            text(
                "SELECT DISTINCT ON (quota_id) quota_id, spec FROM quota_tree_history"
                f"{only} ORDER BY quota_id, at DESC, position DESC"
            ),
            {"at": at},
        )
        if spec is not None
    }
