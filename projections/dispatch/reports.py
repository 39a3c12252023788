"""What the dispatcher's decisions cost: waits, preemptions and goodput.

Read from the stored decision events (``AdmissionDecided``, ``PreemptionDecided``), the
job read model (``job_state``: names, priorities, quotas) and the billing read model's
occupancies (``billing_occupancies``: each pod's occupied interval, its end reason, its
quota resolved through the workspace binding):

- **waits**: a wait opens when a job is submitted (``JobSubmitted``) or preempted (it is
  named a victim in a ``PreemptionDecided``: the requeue is a new wait) and closes at the
  next ``AdmissionDecided`` with outcome ``admit``; ``wait = admitted - queued``. p50 / p95
  (continuous percentiles) / max per admitted quota and priority, for waits that closed in
  ``[from, to)``; ``waiting`` counts the jobs of the group the dispatcher has decided on
  whose wait is still open, ``withdrawn`` those deleted while waiting.
- **preemptions**: one row per victim of each ``PreemptionDecided`` in the window: who
  preempted whom, the reason, and what the victim lost, as GPU-hours and as cost rated at
  the job's own rate: :func:`projections.dispatch.losses.lost_work`, the computation
  ``jobs why`` shows too (its pods open at the decision, to their ends or, still
  releasing, to the latest projected fact; none counted twice).
- **goodput**: of the occupancies that ended in ``[from, to)``, the share of occupied
  GPU-hours (``goodput``) and of occupied hours (``time_goodput``) whose pod ended in
  success (``end_reason = completed``), by quota or by workspace.
- **estimates**: per wait (a job's pending episode, ``attempt``) that has a pending
  ``AdmissionDecided`` and was admitted in ``[from, to)``, the first ``estimated_start``
  and the first range (``estimated_start_low`` / ``_high``) stored with a pending decision
  of the episode against the admission: the error (actual - estimated) and whether the
  start fell inside the range, below or above it (:func:`estimates_report`); the
  calibration as one figure: :func:`estimate_coverage`.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal

from sqlalchemy import Connection, text

from ledger.dispatch.runtimes import percentile
from ledger.errors import Invalid
from ledger.store.views import typed_events
from projections.dispatch.estimates import projected_now
from projections.dispatch.losses import lost_work
from projections.pages import check_report_rows
from projections.quotas import subtree_condition

__all__ = [
    "GOODPUT_KEYS",
    "Coverage",
    "DecisionWindow",
    "EstimatedWait",
    "estimate_coverage",
    "estimate_waits",
    "estimates_report",
    "goodput_report",
    "preemptions_report",
    "wait_intervals",
    "waits_report",
]

GOODPUT_KEYS = ("quota", "workspace")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FAR = datetime(9999, 12, 31, tzinfo=UTC)


@dataclass(frozen=True)
class DecisionWindow:
    start: datetime | None = None  # cluster time, inclusive
    end: datetime | None = None  # cluster time, exclusive
    #: a caller's scope (None: everything): rows of their quota subtree only
    #: (:mod:`projections.quotas.scope`), or of these workspaces for ``goodput --by workspace``
    workspaces: tuple[str, ...] | None = None

    def params(self) -> dict[str, Any]:
        return {"from": self.start or _EPOCH, "to": self.end or _FAR}

    def in_subtree(self, column: str) -> tuple[str, dict[str, Any]]:
        """The scope's condition on a quota ``column`` and the window's parameters."""
        condition, params = subtree_condition(column, self.workspaces)
        return condition, {**self.params(), **params}


# One row per wait: the job, when it was queued (submitted, or named a victim), when it was
# admitted (NULL: still waiting), the quota it was admitted to. ``segment`` numbers a job's
# admissions: every queue mark belongs to the admission after it.
_WAITS = f"""
WITH marks AS (
    SELECT data->>'job_uid' AS job_uid, occurred_at AS at, position, 0 AS admits,
           NULL::text AS quota
      FROM {typed_events("JobSubmitted")} s
    UNION ALL
    SELECT v->>'job_uid', e.occurred_at, e.position, 0, v->>'quota'
      FROM {typed_events("PreemptionDecided")} e
     CROSS JOIN LATERAL jsonb_array_elements(e.data->'victims') AS v
    UNION ALL
    SELECT data->>'job_uid', occurred_at, position, 1, data->>'quota'
      FROM {typed_events("AdmissionDecided")} a WHERE data->>'outcome' = 'admit'
), decided AS (
    SELECT DISTINCT data->>'job_uid' AS job_uid FROM {typed_events("AdmissionDecided")} a
    UNION
    SELECT v->>'job_uid'
      FROM {typed_events("PreemptionDecided")} e
     CROSS JOIN LATERAL jsonb_array_elements(e.data->'victims') AS v
), segmented AS (
    SELECT m.*, COALESCE(SUM(admits) OVER (
               PARTITION BY job_uid ORDER BY at, position
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS segment
      FROM marks m WHERE job_uid IN (SELECT job_uid FROM decided)
), waits AS (
    SELECT job_uid, segment,
           MIN(at) FILTER (WHERE admits = 0) AS queued_at,
           MIN(at) FILTER (WHERE admits = 1) AS admitted_at,
           MIN(quota) FILTER (WHERE admits = 1) AS admitted_quota,
           MIN(quota) FILTER (WHERE admits = 0) AS victim_quota,
           COUNT(*) FILTER (WHERE admits = 0 AND quota IS NOT NULL) > 0 AS requeued
      FROM segmented GROUP BY job_uid, segment
)
SELECT w.job_uid, j.name, j.namespace, w.queued_at, w.admitted_at, w.requeued, j.deleted_at,
       COALESCE(w.admitted_quota, w.victim_quota, j.quota, b.quota, '-') AS quota,
       COALESCE(j.priority, 0) AS priority,
       EXTRACT(EPOCH FROM w.admitted_at - w.queued_at)::float8 AS wait_s
  FROM waits w
  LEFT JOIN job_state j ON j.job_uid = w.job_uid
  LEFT JOIN job_workspace_quotas b ON b.workspace = j.workspace
 WHERE w.queued_at IS NOT NULL
"""


def decision_counts(conn: Connection) -> dict[str, int]:
    """How many admissions, preemption decisions and victims the dispatcher stored."""
    rows = conn.execute(
        text(
            f"SELECT 'admitted', COUNT(*) FROM {typed_events('AdmissionDecided')} a"
            " WHERE data->>'outcome' = 'admit'"
            f" UNION ALL SELECT 'preemptions', COUNT(*) FROM {typed_events('PreemptionDecided')} p"
            " UNION ALL SELECT 'victims', COALESCE(SUM(jsonb_array_length(data->'victims')), 0)"
            f" FROM {typed_events('PreemptionDecided')} v"
        )
    ).all()
    return {str(name): int(count) for name, count in rows}


def wait_intervals(conn: Connection, window: DecisionWindow = DecisionWindow()) -> list[Any]:
    """Every wait (closed in the window, or still open), ordered by job and queue time."""
    return list(
        conn.execute(
            text(
                f"SELECT * FROM ({_WAITS}) x WHERE admitted_at IS NULL"
                " OR (admitted_at >= :from AND admitted_at < :to)"
                " ORDER BY job_uid, queued_at"
            ),
            window.params(),
        ).all()
    )


def waits_report(conn: Connection, window: DecisionWindow) -> list[dict[str, Any]]:
    """p50 / p95 / max wait (seconds) by admitted quota and priority (module docstring)."""
    scoped, params = window.in_subtree("quota")
    rows = conn.execute(
        text(
            f"""
            SELECT quota, priority,
                   COUNT(admitted_at) AS waits,
                   COUNT(admitted_at) FILTER (WHERE requeued) AS requeued,
                   COUNT(*) FILTER (WHERE admitted_at IS NULL AND deleted_at IS NULL)
                       AS waiting,
                   COUNT(*) FILTER (WHERE admitted_at IS NULL AND deleted_at IS NOT NULL)
                       AS withdrawn,
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY wait_s) AS p50_s,
                   percentile_cont(0.95) WITHIN GROUP (ORDER BY wait_s) AS p95_s,
                   MAX(wait_s) AS max_s,
                   AVG(wait_s) AS mean_s
              FROM ({_WAITS}) x
             WHERE (admitted_at IS NULL OR (admitted_at >= :from AND admitted_at < :to))
               AND {scoped}
             GROUP BY quota, priority
             ORDER BY quota, priority DESC
            """
        ),
        params,
    ).mappings()
    out = [{k: _seconds(v) if k.endswith("_s") else v for k, v in row.items()} for row in rows]
    check_report_rows(len(out), hint="narrow --from/--to")
    return out


def _seconds(value: Any) -> Decimal | None:
    return None if value is None else Decimal(str(round(float(value), 1)))


_PREEMPTIONS = """
SELECT e.position, e.occurred_at AS at, e.event_id,
       e.data->>'preemptor' AS preemptor_uid, pj.name AS preemptor,
       COALESCE(pj.quota, pb.quota, '-') AS preemptor_quota, pj.priority AS preemptor_priority,
       v->>'job_uid' AS victim_uid, vj.name AS victim, v->>'quota' AS victim_quota,
       vj.priority AS victim_priority, vj.billing_mode AS victim_billing_mode,
       COALESCE(v->>'reason', e.data->>'reason') AS reason,
       {preemptor_visible} AS preemptor_visible
  FROM {events} e
 CROSS JOIN LATERAL jsonb_array_elements(e.data->'victims') AS v
  -- a service's or notebook's replica (its unit, <uid>#<index>) is its workload's row
  LEFT JOIN job_state pj ON pj.job_uid = split_part(e.data->>'preemptor', '#', 1)
  LEFT JOIN job_workspace_quotas pb ON pb.workspace = pj.workspace
  LEFT JOIN job_state vj ON vj.job_uid = split_part(v->>'job_uid', '#', 1)
 WHERE e.occurred_at >= :from AND e.occurred_at < :to
   AND {victim_visible}
 ORDER BY e.occurred_at, e.position, v->>'job_uid'
"""

# Every earlier decision naming a victim of the window: what they lost is not lost again
_EARLIER = f"""
SELECT v->>'job_uid' AS victim_uid, e.occurred_at AS at
  FROM {typed_events("PreemptionDecided")} e
 CROSS JOIN LATERAL jsonb_array_elements(e.data->'victims') AS v
 WHERE e.occurred_at < :from
   AND v->>'job_uid' = ANY(:victims)
"""


def preemptions_report(conn: Connection, window: DecisionWindow) -> list[dict[str, Any]]:
    """One row per victim of each stored preemption decision (module docstring); amounts
    as ``lost_cost_minor`` + ``currency`` (the CLI adds the decimal and the scale).

    Scoped (``window.workspaces``): the preemptions of victims in the caller's quota
    subtree; a preemptor outside it is not named (its name, uid, quota and priority
    read as null)."""
    victim_visible, params = window.in_subtree("v->>'quota'")
    preemptor_visible, _ = window.in_subtree("COALESCE(pj.quota, pb.quota, e.data->>'quota')")
    query = _PREEMPTIONS.format(
        events=typed_events("PreemptionDecided"),
        victim_visible=victim_visible,
        preemptor_visible=preemptor_visible,
    )
    rows = conn.execute(text(query), params).all()
    check_report_rows(len(rows), hint="narrow --from/--to")
    victims = sorted({row.victim_uid for row in rows})
    earlier = conn.execute(text(_EARLIER), {**params, "victims": victims}).all() if rows else []
    losses = lost_work(
        conn,
        [*((r.victim_uid, r.at) for r in earlier), *((r.victim_uid, r.at) for r in rows)],
        projected_now(conn),
    )
    out: list[dict[str, Any]] = []
    for row in rows:
        lost = losses[(row.victim_uid, row.at)]
        out.append(
            {
                "at": row.at,
                "preemptor": row.preemptor or row.preemptor_uid,
                "preemptor_quota": row.preemptor_quota,
                "preemptor_priority": row.preemptor_priority,
                "victim": row.victim or row.victim_uid,
                "victim_quota": row.victim_quota,
                "victim_priority": row.victim_priority,
                "victim_billing_mode": row.victim_billing_mode,
                "reason": row.reason,
                "victim_started_at": lost.started_at,
                "gpu_hours_lost": round(lost.gpu_hours, 4),
                "lost_cost_minor": lost.cost_minor,
                "currency": lost.currency,
                "preemptor_uid": row.preemptor_uid,
                "victim_uid": row.victim_uid,
                "event_id": str(row.event_id),
            }
        )
        if not row.preemptor_visible:
            for key in ("preemptor", "preemptor_quota", "preemptor_priority", "preemptor_uid"):
                out[-1][key] = None
    return out


def goodput_report(
    conn: Connection, by: Literal["quota", "workspace"], window: DecisionWindow
) -> list[dict[str, Any]]:
    """Share of occupied time that ended in success, by quota or workspace (docstring)."""
    if by not in GOODPUT_KEYS:
        raise Invalid(f"unknown --by {by!r}: use {' or '.join(GOODPUT_KEYS)}")
    column = "COALESCE(quota, '-')" if by == "quota" else "workspace"
    if by == "quota":
        scoped, params = window.in_subtree(column)
    else:
        scoped = "TRUE" if window.workspaces is None else "workspace = ANY(:scope_workspaces)"
        params = {**window.params(), "scope_workspaces": list(window.workspaces or ())}
    rows = conn.execute(
        text(
            f"""
            WITH o AS (
                SELECT {column} AS key, end_reason = 'completed' AS ok, mgpu,
                       EXTRACT(EPOCH FROM ended_at - started_at)::numeric AS s
                  FROM billing_occupancies
                 WHERE ended_at IS NOT NULL AND ended_at >= :from AND ended_at < :to
                   AND {scoped}
            )
            SELECT key, COUNT(*) AS occupancies, COUNT(*) FILTER (WHERE ok) AS succeeded,
                   SUM(s * mgpu) / 3600000 AS gpu_hours,
                   COALESCE(SUM(s * mgpu) FILTER (WHERE ok), 0) / 3600000 AS good_gpu_hours,
                   SUM(s) / 3600 AS hours,
                   COALESCE(SUM(s) FILTER (WHERE ok), 0) / 3600 AS good_hours
              FROM o GROUP BY key ORDER BY key
            """
        ),
        params,
    ).all()
    out = []
    for row in rows:
        gpu, good_gpu = Decimal(row.gpu_hours or 0), Decimal(row.good_gpu_hours or 0)
        hours, good = Decimal(row.hours or 0), Decimal(row.good_hours or 0)
        out.append(
            {
                by: row.key,
                "occupancies": row.occupancies,
                "succeeded": row.succeeded,
                "gpu_hours": round(gpu, 4),
                "good_gpu_hours": round(good_gpu, 4),
                "goodput": round(good_gpu / gpu, 4) if gpu else None,
                "hours": round(hours, 4),
                "time_goodput": round(good / hours, 4) if hours else None,
            }
        )
    check_report_rows(len(out), hint="narrow --from/--to")
    return out


# One row per wait with a pending decision and an admission: its first estimate, its first
# range, the admission (each the first of the episode by store position)
_ESTIMATES = f"""
WITH d AS (
    SELECT position, occurred_at, data->>'job_uid' AS job_uid,
           COALESCE((data->>'attempt')::int, 0) AS attempt, data->>'outcome' AS outcome,
           data->>'quota' AS quota, (data->>'estimated_start')::timestamptz AS est,
           (data->>'estimated_start_low')::timestamptz AS low,
           (data->>'estimated_start_high')::timestamptz AS high
      FROM {typed_events("AdmissionDecided")} a
     WHERE data->>'outcome' IN ('pending', 'admit')
), w AS (
    SELECT job_uid, attempt,
           (array_agg(quota ORDER BY position) FILTER (WHERE outcome = 'pending'))[1]
               AS pending_quota,
           (array_agg(occurred_at ORDER BY position)
               FILTER (WHERE outcome = 'pending' AND est IS NOT NULL))[1] AS estimated_at,
           (array_agg(est ORDER BY position)
               FILTER (WHERE outcome = 'pending' AND est IS NOT NULL))[1] AS estimated_start,
           (array_agg(low ORDER BY position)
               FILTER (WHERE outcome = 'pending' AND low IS NOT NULL))[1] AS low,
           (array_agg(high ORDER BY position)
               FILTER (WHERE outcome = 'pending' AND low IS NOT NULL))[1] AS high,
           (array_agg(occurred_at ORDER BY position) FILTER (WHERE outcome = 'admit'))[1]
               AS actual_start,
           (array_agg(quota ORDER BY position) FILTER (WHERE outcome = 'admit'))[1]
               AS admitted_quota
      FROM d GROUP BY job_uid, attempt
)
SELECT job_uid, attempt, COALESCE(NULLIF(admitted_quota, ''), pending_quota) AS quota,
       estimated_at, estimated_start, low, high, actual_start
  FROM w
 WHERE pending_quota IS NOT NULL AND actual_start IS NOT NULL
   AND actual_start >= :from AND actual_start < :to
"""


@dataclass(frozen=True)
class EstimatedWait:
    """One wait's first stored estimate and range against its admission."""

    job_uid: str
    attempt: int
    quota: str
    estimated_at: datetime | None
    estimated_start: datetime | None
    #: the range; ``high`` None with a ``low``: no upper bound
    low: datetime | None
    high: datetime | None
    actual_start: datetime

    @property
    def error_seconds(self) -> float | None:
        """actual - estimated (positive: it started later than estimated)."""
        if self.estimated_start is None:
            return None
        return (self.actual_start - self.estimated_start).total_seconds()

    @property
    def in_range(self) -> Literal["inside", "below", "above"] | None:
        """Where the actual start fell against the range (None: no range)."""
        if self.low is None:
            return None
        if self.actual_start < self.low:
            return "below"
        if self.high is not None and self.actual_start > self.high:
            return "above"
        return "inside"


def estimate_waits(
    conn: Connection, window: DecisionWindow = DecisionWindow()
) -> list[EstimatedWait]:
    """The waits admitted in the window that the dispatcher decided pending, by admission."""
    scoped, params = window.in_subtree("quota")
    rows = conn.execute(text(f"SELECT * FROM ({_ESTIMATES}) e WHERE {scoped}"), params).all()
    waits = [
        EstimatedWait(
            str(r.job_uid),
            int(r.attempt),
            str(r.quota or "-"),
            r.estimated_at,
            r.estimated_start,
            r.low,
            r.high,
            r.actual_start,
        )
        for r in rows
    ]
    waits.sort(key=lambda w: (w.actual_start, w.job_uid, w.attempt))
    return waits


@dataclass(frozen=True)
class Coverage:
    """How well the stored ranges held: of the waits with a range, the share whose actual
    start fell inside it, below it (earlier) and above it (later)."""

    waits: int
    #: waits that had a range
    ranged: int
    inside: int
    below: int
    above: int

    def share(self, count: int) -> float | None:
        return None if not self.ranged else count / self.ranged

    @property
    def coverage(self) -> float | None:
        """The share inside the range (None without a range)."""
        return self.share(self.inside)

    @staticmethod
    def of(waits: Sequence[EstimatedWait]) -> Coverage:
        where = [w.in_range for w in waits]
        return Coverage(
            len(waits),
            sum(1 for x in where if x is not None),
            where.count("inside"),
            where.count("below"),
            where.count("above"),
        )


def estimate_coverage(conn: Connection, window: DecisionWindow = DecisionWindow()) -> Coverage:
    """The calibration of the stored ranges over every quota (``report estimates``'
    ``(all)`` row): how many waits had a range, and where their starts fell."""
    return Coverage.of(estimate_waits(conn, window))


def _error_figures(errors: Sequence[float]) -> dict[str, float | None]:
    """p50/p95/mean of the absolute errors and the mean signed error, to a tenth of a second
    (estimates and starts are cluster instants to the second); None without errors."""
    names = ("p50_abs_error_seconds", "p95_abs_error_seconds", "mean_abs_error_seconds")
    if not errors:
        return dict.fromkeys((*names, "mean_error_seconds"))
    absolute = sorted(abs(x) for x in errors)
    figures = (percentile(absolute, 0.5), percentile(absolute, 0.95), statistics.fmean(absolute))
    out: dict[str, float | None] = {n: round(v, 1) for n, v in zip(names, figures, strict=True)}
    out["mean_error_seconds"] = round(statistics.fmean(errors), 1)
    return out


def _share(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def estimates_report(
    conn: Connection, window: DecisionWindow = DecisionWindow(), *, per_job: bool = False
) -> list[dict[str, Any]]:
    """Start estimates against actual starts (module docstring). Rows per quota and
    ``(all)``: the waits, how many had an estimate, their absolute error's p50 / p95 / mean
    and the mean error; how many had a range (``ranged``) and the shares whose start fell
    inside, below and above it. With ``per_job``, one row per wait (no estimate: its
    estimate and error None; no range: ``low``, ``high`` and ``in_range`` None)."""
    waits = estimate_waits(conn, window)
    if per_job:
        check_report_rows(len(waits), hint="narrow --from/--to")
        return [
            {
                "job_uid": w.job_uid,
                "attempt": w.attempt,
                "quota": w.quota,
                "estimated_at": w.estimated_at,
                "estimated_start": w.estimated_start,
                "estimated_start_low": w.low,
                "estimated_start_high": w.high,
                "actual_start": w.actual_start,
                "error_seconds": w.error_seconds,
                "in_range": w.in_range,
            }
            for w in waits
        ]
    groups: dict[str | None, list[EstimatedWait]] = {None: []}
    for w in waits:
        groups.setdefault(w.quota, []).append(w)
        groups[None].append(w)
    rows = []
    for group in [*sorted(q for q in groups if q is not None), None]:
        members = groups[group]
        errors = [e for w in members if (e := w.error_seconds) is not None]
        cover = Coverage.of(members)
        rows.append(
            {
                "quota": group if group is not None else "(all)",
                "waits": len(members),
                "estimated": len(errors),
                **_error_figures(errors),
                "ranged": cover.ranged,
                "inside": _share(cover.coverage),
                "below": _share(cover.share(cover.below)),
                "above": _share(cover.share(cover.above)),
            }
        )
    return rows
