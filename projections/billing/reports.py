"""Finance reports: usage and cost grouped by workspace, quota, user, flavor, mode, day, month, job.

Two questions, answered from the billing read model (:mod:`projections.billing.projection`):

- **usage** is the exact occupied quantity (mGPU·s, CPU milli·s, MiB·s) of the
  occupancy facts clipped to ``[from, to)``, split at day / month boundaries in
  SQL; an interval still open (or whose end was not yet recorded at ``as_of``)
  counts up to ``to`` or the cluster clock, whichever comes first.
- **cost** comes from the ledger when it can (``source="ledger"``: what the
  rater posted, per usage month, from the pre-aggregated ``billing_cost_monthly``
  or, with ``as_of``, the transactions recorded by then), and otherwise is rated
  from the facts with the same pure rating code (``source="rated"``: needed for
  day grouping or windows that do not fall on month boundaries), carrying each
  occupancy x period x resource x rate part at sub-minor precision exactly like
  the ledger. A row's ``cost_minor`` is its ``cost_minor_precise`` rounded once,
  half-even.

``as_of`` (store time) keeps only what had been recorded by then: occupancy
halves, price events and transactions with ``recorded_at <= as_of``. ``from`` /
``to`` are cluster time. The window ends at ``to`` or at the cluster clock as the
store knows it (the latest occupancy instant recorded), whichever comes first. A
report returns at most ``MAX_REPORT_ROWS`` rows (:mod:`projections.pages`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any, Literal

from sqlalchemy import Connection, text

from ledger.errors import Invalid
from ledger.money import plain_decimal, precise_decimal, round_precise, to_decimal
from ledger.prices import NoApplicableRate
from ledger.rating import (
    BillingPeriod,
    PeriodFn,
    calendar_months,
    rate_interval,
    usage_quantity,
)
from projections.billing.reads import load_schedule, occupancy_from_row
from projections.pages import MAX_REPORT_ROWS, check_report_rows

__all__ = [
    "CREDIT_KEYS",
    "GROUP_KEYS",
    "ROUNDING",
    "SUBSCRIPTIONS",
    "Only",
    "ReportWindow",
    "calendar_days",
    "cluster_clock",
    "cost_report",
    "cost_row",
    "invoice_job_costs",
    "invoice_lines",
    "job_cost",
    "ledger_cost_sql",
    "parse_group_by",
    "usage_report",
    "uses_ledger",
]

GROUP_KEYS = (
    "workspace", "quota", "user", "flavor", "billing_mode", "day", "month", "job", "kind",
    "service",
)  # fmt: skip
_COLUMN = {
    "workspace": "workspace",
    "quota": "COALESCE(quota, '-')",  # '-': no quota, as in the quota projection
    "user": "user_name",
    "flavor": "flavor",
    "billing_mode": "billing_mode",
    "job": "job_uid",
    # a job's workload: training, service or notebook; a service's namespace/name, '-' for
    # any other job (docs/workloads.md): read from ``billing_workloads`` (:data:`_WORKLOADS`)
    "kind": "COALESCE(workload, 'training')",
    "service": "COALESCE(service, '-')",
}
#: The keys read from a job's workload: a query grouping by them selects :data:`_WORKLOADS`.
_WORKLOAD_KEYS = frozenset({"kind", "service"})
#: SQL columns ``workload`` and ``service`` of the job of a row of ``{t}`` (its job_uid).
_WORKLOADS = (
    "(SELECT w.workload FROM billing_workloads w WHERE w.job_uid = {t}.job_uid) AS workload, "
    "(SELECT w.namespace || '/' || w.name FROM billing_workloads w "
    "WHERE w.job_uid = {t}.job_uid AND w.workload = 'service') AS service"
)


def _q(key: str) -> str:
    """A group key as a quoted SQL alias: bare ``user`` is PostgreSQL's CURRENT_USER."""
    return f'"{key}"'


def _keys(keys: Sequence[str]) -> str:
    return ", ".join(_q(k) for k in keys)


def parse_group_by(text_value: str) -> tuple[str, ...]:
    """``"workspace,month"`` -> ``("workspace", "month")``; unknown keys are a ValueError."""
    keys = tuple(k.strip() for k in text_value.split(",") if k.strip())
    bad = [k for k in keys if k not in GROUP_KEYS]
    if bad:
        raise Invalid(f"unknown --group-by key(s) {', '.join(bad)}: use {', '.join(GROUP_KEYS)}")
    if len(set(keys)) != len(keys):
        raise Invalid("--group-by lists a key twice")
    return keys


@dataclass(frozen=True)
class ReportWindow:
    start: datetime | None = None  # cluster time, inclusive
    end: datetime | None = None  # cluster time, exclusive; None: the cluster clock
    as_of: datetime | None = None  # store time: recorded_at <= as_of
    # a reader's scope (an API token's workspace roles), applied in each query's WHERE;
    # None: every workspace
    workspaces: tuple[str, ...] | None = None


def cluster_clock(conn: Connection, as_of: datetime | None = None) -> datetime | None:
    """The latest occupancy instant recorded (by ``as_of``): "now" in cluster time."""
    value = conn.execute(
        text(
            "SELECT GREATEST("
            " (SELECT max(started_at) FROM billing_occupancies "
            "   WHERE CAST(:t AS timestamptz) IS NULL OR start_recorded_at <= :t),"
            " (SELECT max(ended_at) FROM billing_occupancies "
            "   WHERE CAST(:t AS timestamptz) IS NULL OR end_recorded_at <= :t))"
        ),
        {"t": as_of},
    ).scalar_one()
    return value  # type: ignore[no-any-return]


def _scope(window: ReportWindow) -> list[str] | None:
    return None if window.workspaces is None else sorted(window.workspaces)


#: A report narrowed to some of its groups: a key with a column (not day or month) and
#: the values kept, e.g. ``("job", ["a-1", "a-2"])``: a page's or a top list's groups.
Only = tuple[str, Sequence[str]]


def _only(only: Only | None, params: dict[str, Any]) -> str:
    """The SQL condition keeping the groups ``only`` names; its values go into ``params``."""
    if only is None:
        return ""
    key, values = only
    if key not in _COLUMN or key in _WORKLOAD_KEYS:
        narrowing = [k for k in _COLUMN if k not in _WORKLOAD_KEYS]
        raise Invalid(f"a report is narrowed by {', '.join(narrowing)} only, not {key}")
    params["only"] = sorted(set(values))
    return f" AND {_COLUMN[key]} = ANY(:only)"


def _end(conn: Connection, window: ReportWindow) -> datetime:
    """Where the report's window ends: ``to``, but never past the cluster clock. No fact
    lies beyond the clock, and an open interval is known to run only up to it: counting
    it on to a far ``to`` (9999-12-31) would invent usage and make the report's cost grow
    with the window's length instead of with the facts."""
    clock = cluster_clock(conn, window.as_of)
    end = clock if window.end is None or clock is None else min(window.end, clock)
    return end or datetime(1970, 1, 1, tzinfo=UTC)


_TOO_MANY = "narrow --from/--to, group by fewer keys, or by month instead of day"


_OCCUPANCIES = """
SELECT occupancy_id, job_uid, workspace, quota, user_name, flavor, mgpu, cpu_milli,
       memory_mib, billing_mode, started_at,
       CASE WHEN ended_at IS NOT NULL
             AND (CAST(:as_of AS timestamptz) IS NULL OR end_recorded_at <= :as_of)
            THEN GREATEST(ended_at, started_at) END AS ended_at,
       {workloads}
  FROM billing_occupancies
 WHERE started_at IS NOT NULL AND started_at < :to
   AND (CAST(:as_of AS timestamptz) IS NULL OR start_recorded_at <= :as_of)
"""
_IN_SCOPE = " AND (CAST(:workspaces AS text[]) IS NULL OR workspace = ANY(:workspaces))"
_NO_WORKLOADS = "NULL::text AS workload, NULL::text AS service"


def _occupancies(group_by: Collection[str] = _WORKLOAD_KEYS) -> str:
    """:data:`_OCCUPANCIES`, with each job's workload when the report needs it."""
    needed = not _WORKLOAD_KEYS.isdisjoint(group_by)
    workloads = _WORKLOADS.format(t="billing_occupancies") if needed else _NO_WORKLOADS
    return _OCCUPANCIES.format(workloads=workloads)


def usage_report(
    conn: Connection,
    group_by: Sequence[str],
    window: ReportWindow,
    *,
    only: Only | None = None,
) -> list[dict[str, Any]]:
    """Rows of the group keys + ``mgpu_seconds``, ``cpu_milli_seconds``, ``memory_mib_seconds``;
    ``only``: just the groups it names (their rows are the same as in the whole report)."""
    params: dict[str, Any] = {}
    narrowed = _only(only, params)
    end = _end(conn, window)
    start = window.start or datetime(1970, 1, 1, tzinfo=UTC)
    bucket = "day" if "day" in group_by else "month" if "month" in group_by else None
    keys_sql = [f"{_COLUMN[k]} AS {_q(k)}" for k in group_by if k in _COLUMN]
    if bucket is None:
        piece = "c.a, c.b"
        split = ""
    else:
        split = (
            f", LATERAL generate_series(date_trunc('{bucket}', c.a), "
            f"c.b - interval '1 microsecond', interval '1 {bucket}') AS s(bucket)"
        )
        piece = (
            f"GREATEST(c.a, s.bucket) AS a, LEAST(c.b, s.bucket + interval '1 {bucket}') AS b, "
            "s.bucket"
        )
        if "day" in group_by:
            keys_sql.append("to_char(bucket, 'YYYY-MM-DD') AS day")
        if "month" in group_by:
            keys_sql.append("to_char(bucket, 'YYYY-MM') AS month")
    cols = _keys(group_by)
    select_keys = ", ".join(keys_sql)
    sql = f"""
WITH o AS ({_occupancies(group_by)}{_IN_SCOPE}{narrowed}),
c AS (
  SELECT o.*, GREATEST(started_at, :from) AS a, LEAST(COALESCE(ended_at, :to), :to) AS b FROM o
),
p AS (
  SELECT c.job_uid, c.workspace, c.quota, c.user_name, c.flavor, c.billing_mode, c.mgpu,
         c.cpu_milli, c.memory_mib, c.workload, c.service, {piece}
    FROM c {split} WHERE c.a < c.b
),
q AS (
  SELECT {select_keys + ", " if select_keys else ""}
         round(EXTRACT(EPOCH FROM (b - a)) * 1000000)::bigint AS us, mgpu, cpu_milli, memory_mib
    FROM p WHERE a < b
)
SELECT {cols + ", " if cols else ""}
       COALESCE(sum(mgpu::numeric * us), 0) AS mgpu_us,
       COALESCE(sum(cpu_milli::numeric * us), 0) AS cpu_us,
       COALESCE(sum(memory_mib::numeric * us), 0) AS mem_us
  FROM q {"GROUP BY " + cols if cols else ""} {"ORDER BY " + cols if cols else ""}
 LIMIT :cap
"""
    conn.execute(text("SET LOCAL TimeZone = 'UTC'"))
    params.update(
        {
            "from": start,
            "to": end,
            "as_of": window.as_of,
            "cap": MAX_REPORT_ROWS + 1,
            "workspaces": _scope(window),
        }
    )
    rows = conn.execute(text(sql), params).all()
    check_report_rows(len(rows), hint=_TOO_MANY)
    out = []
    for row in rows:
        item = {k: getattr(row, k) for k in group_by}
        if not cols and row.mgpu_us == 0 and row.cpu_us == 0 and row.mem_us == 0:
            return []
        item["mgpu_seconds"] = _seconds(row.mgpu_us)
        item["cpu_milli_seconds"] = _seconds(row.cpu_us)
        item["memory_mib_seconds"] = _seconds(row.mem_us)
        out.append(item)
    return out


def _seconds(micros: Any) -> int:
    # exact whenever instants are whole seconds (Kubernetes timestamps are)
    return int((Decimal(micros) / 1_000_000).to_integral_value(ROUND_HALF_EVEN))


# --- cost -----------------------------------------------------------------------------


def calendar_days() -> PeriodFn:
    """Periods = UTC calendar days (keys ``YYYY-MM-DD``)."""

    def period_of(t: datetime) -> BillingPeriod:
        u = t.astimezone(UTC)
        first = datetime(u.year, u.month, u.day, tzinfo=UTC)
        return BillingPeriod(first.strftime("%Y-%m-%d"), first, first + timedelta(days=1))

    return period_of


def _month_aligned(t: datetime | None) -> bool:
    if t is None:
        return True
    u = t.astimezone(UTC)
    return (u.day, u.hour, u.minute, u.second, u.microsecond) == (1, 0, 0, 0, 0)


Source = Literal["auto", "ledger", "rated"]


def uses_ledger(group_by: Sequence[str], window: ReportWindow, source: Source) -> bool:
    """Whether a cost report reads the ledger (else it rates the facts): ``auto`` does
    when the ledger can answer, per month, with no day grouping; ``ledger`` must."""
    ledger_ok = (
        "day" not in group_by and _month_aligned(window.start) and _month_aligned(window.end)
    )
    if source == "ledger" and not ledger_ok:
        raise Invalid(
            "the ledger books cost per month: day grouping or a window not on month "
            "boundaries needs --source rated"
        )
    return source == "ledger" or (source == "auto" and ledger_ok)


def cost_report(
    conn: Connection,
    group_by: Sequence[str],
    window: ReportWindow,
    *,
    source: Source = "auto",
    net_credits: bool = False,
    only: Only | None = None,
    billed_months: bool = True,
) -> list[dict[str, Any]]:
    """Rows of the group keys + ``cost_minor`` (and at full precision) and ``currency``;
    ``net_credits``: also ``credited_minor`` and ``net_minor`` (see :func:`_net_of_credits`);
    ``only``: just the groups it names (their rows are the same as in the whole report);
    ``billed_months``: a workspace x month that was billed shows, at 0.00 if it nets to
    zero (:func:`_with_billed_months`; a ranking of the costliest leaves them out)."""
    ledger = uses_ledger(group_by, window, source)
    if net_credits and not set(group_by) <= CREDIT_KEYS:
        raise Invalid(
            "credit notes are issued per invoice (workspace x month): --net-credits groups "
            "by workspace and/or month only"
        )
    if ledger:
        rows = _ledger_cost(conn, group_by, window, only)
    else:
        rows = _rated_cost(conn, group_by, window, only)
    if billed_months:
        rows = _with_billed_months(conn, rows, group_by, window, only)
    return _net_of_credits(conn, rows, group_by, window) if net_credits else rows


#: The keys a credit note can be attributed to: its invoice's workspace and period.
CREDIT_KEYS = frozenset({"workspace", "month"})


def _with_billed_months(
    conn: Connection,
    rows: list[dict[str, Any]],
    group_by: Sequence[str],
    window: ReportWindow,
    only: Only | None,
) -> list[dict[str, Any]]:
    """``rows`` and a 0.00 row for each workspace x month (on those keys only) of the
    window that has an issued invoice or postings but no row: a month whose charges net to
    zero (bought and refunded, rounded to nothing) was billed, and a report that leaves
    it out reads as if it never was."""
    if not group_by or not set(group_by) <= CREDIT_KEYS:
        return rows
    params: dict[str, Any] = {"workspaces": _scope(window), "as_of": window.as_of}
    months = ""
    if window.start is not None:
        months += " AND {m} >= :pf"
        params["pf"] = window.start.astimezone(UTC).strftime("%Y-%m")
    if window.end is not None:  # the month the window's last instant is in
        months += " AND {m} <= :pt"
        params["pt"] = (window.end.astimezone(UTC) - timedelta(microseconds=1)).strftime("%Y-%m")
    scoped = "(CAST(:workspaces AS text[]) IS NULL OR workspace = ANY(:workspaces))"
    recorded = "(CAST(:as_of AS timestamptz) IS NULL OR recorded_at <= :as_of)"
    # usage per month from the monthly aggregate (or, as of a store time, the transactions
    # recorded by then); charges and roundings (no usage month) by their billing period
    usage = (
        "SELECT workspace, usage_period, currency FROM billing_transactions "
        f"WHERE usage_period IS NOT NULL AND {recorded}"
        if window.as_of is not None
        else "SELECT workspace, usage_period, currency FROM billing_cost_monthly WHERE TRUE"
    )
    billed = conn.execute(
        text(
            f"SELECT workspace, period, currency FROM billing_invoices "
            f"WHERE status = 'issued' AND {scoped} AND {recorded}{months.format(m='period')}"
            f" UNION {usage} AND {scoped}{months.format(m='usage_period')}"
            " UNION SELECT workspace, period, currency FROM billing_transactions "
            "WHERE usage_period IS NULL AND period IS NOT NULL AND workspace IS NOT NULL "
            f"AND currency IS NOT NULL AND {scoped} AND {recorded}{months.format(m='period')}"
        ),
        params,
    ).all()
    shown = {(*(row[k] for k in group_by), row["currency"]) for row in rows}
    added: dict[tuple[Any, ...], dict[str, Any]] = {}
    for workspace, month, currency in billed:
        keys = {k: {"workspace": workspace, "month": month}[k] for k in group_by}
        key = (*keys.values(), currency)
        if key in shown or key in added:
            continue
        if only is not None and only[0] in keys and keys[only[0]] not in only[1]:
            continue
        added[key] = cost_row(keys, Decimal(0), currency)
    if not added:
        return rows
    merged = {(*(row[k] for k in group_by), row["currency"]): row for row in rows}
    merged.update(added)
    return [merged[key] for key in sorted(merged, key=_sort_key)]


def _net_of_credits(
    conn: Connection, rows: list[dict[str, Any]], group_by: Sequence[str], window: ReportWindow
) -> list[dict[str, Any]]:
    """``rows`` with ``credited_minor`` (credit notes against the invoices of each row's
    workspace and month, recorded by ``as_of``) and ``net_minor`` = cost - credited."""
    where = ["TRUE"]
    params: dict[str, Any] = {}
    if window.as_of is not None:
        where.append("c.recorded_at <= :as_of")
        params["as_of"] = window.as_of
    where += _months_within(window, "i.period", params)
    if window.workspaces is not None:
        where.append("i.workspace = ANY(:workspaces)")
        params["workspaces"] = _scope(window)
    columns = {"workspace": "i.workspace", "month": "i.period"}
    keys = [f"{columns[k]} AS {_q(k)}" for k in group_by]
    group = ", ".join([*(columns[k] for k in group_by), "c.currency"])
    credits = {
        (*(getattr(r, k) for k in group_by), r.currency): int(r.credited)
        for r in conn.execute(
            text(
                f"SELECT {', '.join([*keys, 'c.currency AS currency'])}, "
                "sum(c.amount_minor) AS credited FROM billing_credit_notes c "
                f"JOIN billing_invoices i USING (invoice_id) WHERE {' AND '.join(where)} "
                f"GROUP BY {group}"
            ),
            params,
        )
    }
    out = []
    for row in rows:
        credited = credits.pop((*(row[k] for k in group_by), row["currency"]), 0)
        out.append(_with_credit(row, credited))
    # credits whose period shows no cost in the window still reduce what is owed
    for key, credited in sorted(credits.items()):
        row = {**dict(zip(group_by, key[:-1], strict=True)), "currency": key[-1]}
        out.append(_with_credit(cost_row(row, Decimal(0), key[-1]), credited))
    return out


def _with_credit(row: dict[str, Any], credited: int) -> dict[str, Any]:
    currency = row.pop("currency")
    return {
        **row,
        "credited_minor": credited,
        "net_minor": row["cost_minor"] - credited,
        "currency": currency,
    }


def ledger_cost_sql(
    group_by: Sequence[str],
    window: ReportWindow,
    params: dict[str, Any],
    only: Only | None = None,
) -> str:
    """The ledger's cost by the group keys, as SQL: one row per group and currency, the
    keys under their names, ``currency`` and ``cost`` (minor units at full precision, the
    exact sum: round it once). Its values go into ``params``.

    Usage transactions come per usage month from the pre-aggregated
    ``billing_cost_monthly``, or ``billing_usage_lines`` to group by job (with ``as_of``,
    the transactions recorded by then), plus the invoices' roundings (net of a voided
    invoice's reversal): an invoice rounds each line once, so the ledger's cost of a
    closed period is its invoices' totals only with them; and the subscription charges
    (purchases, renewals, refunds: billed per order, not per use). Both are keyed by
    workspace and month; on any other key they stand as :data:`ROUNDING` or
    :data:`SUBSCRIPTIONS` (visible groups, never spread over jobs or quotas)."""
    keys = [
        f"{_COLUMN[k]} AS {_q(k)}" if k in _COLUMN else "usage_period AS month" for k in group_by
    ]
    # the monthly aggregate has no job; the usage lines do (job x month x resource x mode)
    table = (
        "billing_usage_lines"
        if "job" in group_by or not _WORKLOAD_KEYS.isdisjoint(group_by)
        else "billing_cost_monthly"
    )
    where = ["TRUE"]
    rounded = ["usage_period IS NULL", "period IS NOT NULL", "workspace IS NOT NULL"]
    if window.as_of is not None:
        table = "billing_transactions"
        where.append("recorded_at <= :as_of AND usage_period IS NOT NULL")
        rounded.append("recorded_at <= :as_of")
        params["as_of"] = window.as_of
    where += _months_within(window, "usage_period", params)
    rounded += _months_within(window, "period", params)
    if window.workspaces is not None:
        where.append("workspace = ANY(:workspaces)")
        rounded.append("workspace = ANY(:workspaces)")
        params["workspaces"] = _scope(window)
    if only is not None and only[0] not in group_by:
        raise Invalid(f"narrowing the ledger's cost by {only[0]} needs grouping by it")
    narrowed = _only(only, params)
    params["rounding"] = ROUNDING
    params["subscriptions"] = SUBSCRIPTIONS
    named = {"workspace": "workspace", "month": "period"}
    rounding_keys = [
        f"{named[k]} AS {_q(k)}" if k in named else f"kind AS {_q(k)}" for k in group_by
    ]
    outer = [*(_q(k) for k in group_by), "currency"]
    kept = f" WHERE {_q(only[0])} = ANY(:only)" if only is not None else ""
    late = _late_adjustments(group_by, window, params)
    if not _WORKLOAD_KEYS.isdisjoint(group_by):
        table = f"(SELECT t.*, {_WORKLOADS.format(t='t')} FROM {table} t) {table}"
    return (
        f"SELECT {', '.join(outer)}, sum(amount) AS cost FROM ("
        f" SELECT {', '.join([*keys, 'currency', 'amount_minor AS amount'])}"
        f" FROM {table} WHERE {' AND '.join(where)}{narrowed}"
        f" UNION ALL {late}{narrowed}"
        " UNION ALL"
        f" SELECT {', '.join([*rounding_keys, 'currency', 'amount'])} FROM ("
        "  SELECT workspace, period, currency, sum(amount_minor) AS amount,"
        "  CASE WHEN data ? 'charge' THEN CAST(:subscriptions AS text)"
        "  ELSE CAST(:rounding AS text) END AS kind"
        f"  FROM billing_transactions WHERE {' AND '.join(rounded)}"
        "  GROUP BY workspace, period, currency, kind HAVING sum(amount_minor) <> 0) r"
        f") u{kept} GROUP BY {', '.join(outer)}"
    )


#: A usage transaction booked into a later period than its usage's: its period was locked
#: (ledger.periods). Matches the partial index ``billing_transactions_late`` (migration 0028).
_LATE = "usage_period IS NOT NULL AND period <> usage_period"


def _late_adjustments(group_by: Sequence[str], window: ReportWindow, params: dict[str, Any]) -> str:
    """SQL rows moving each late adjustment from its usage month to the month it was
    posted (and invoiced) in: -amount at ``usage_period``, +amount at ``period``, same
    keys otherwise. So the ledger's cost of a closed month is what its invoices hold, a
    late adjustment included in the month that invoiced it."""
    keys = [f"{_COLUMN[k]} AS {_q(k)}" if k in _COLUMN else "m AS month" for k in group_by]
    recorded = " AND recorded_at <= :as_of" if window.as_of is not None else ""
    if window.workspaces is not None:
        recorded += " AND workspace = ANY(:workspaces)"
    workloads = _WORKLOADS.format(t="t") if not _WORKLOAD_KEYS.isdisjoint(group_by) else ""
    extra = f", {workloads}" if workloads else ""
    moved = (
        f"(SELECT t.*, t.period AS m, t.amount_minor AS signed{extra} FROM billing_transactions t "
        f"WHERE {_LATE}{recorded} UNION ALL "
        f"SELECT t.*, t.usage_period AS m, -t.amount_minor AS signed{extra} "
        f"FROM billing_transactions t WHERE {_LATE}{recorded}) late"
    )
    months = ["TRUE", *_months_within(window, "m", params)]
    return (
        f"SELECT {', '.join([*keys, 'currency', 'signed AS amount'])} FROM {moved} "
        f"WHERE {' AND '.join(months)}"
    )


def _ledger_cost(
    conn: Connection, group_by: Sequence[str], window: ReportWindow, only: Only | None
) -> list[dict[str, Any]]:
    params: dict[str, Any] = {}
    rows = conn.execute(text(ledger_cost_sql(group_by, window, params, only)), params)
    sums = {(*(getattr(r, k) for k in group_by), r.currency): Decimal(r.cost) for r in rows}
    return [
        cost_row(dict(zip(group_by, key[:-1], strict=True)), precise, key[-1])
        for key, precise in sorted(sums.items(), key=lambda item: _sort_key(item[0]))
    ]


#: The group key value of an invoice's rounding on keys it has none of (quota, user, ...).
ROUNDING = "(rounding)"
#: ... and of subscription charges (an order's price, its renewals and refunds).
SUBSCRIPTIONS = "(subscriptions)"


def _sort_key(key: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple("" if v is None else str(v) for v in key)


def _months_within(window: ReportWindow, column: str, params: dict[str, Any]) -> list[str]:
    """SQL conditions keeping the months (``YYYY-MM`` in ``column``) of the window's
    month-aligned bounds; their values go into ``params``."""
    where = []
    if window.start is not None:
        where.append(f"{column} >= :pf")
        params["pf"] = window.start.astimezone(UTC).strftime("%Y-%m")
    if window.end is not None:
        where.append(f"{column} < :pt")
        params["pt"] = window.end.astimezone(UTC).strftime("%Y-%m")
    return where


def cost_row(keys: dict[str, Any], precise: Decimal, currency: str | None) -> dict[str, Any]:
    """A cost row: the keys, the cost rounded once (half-even) and at full precision."""
    return {
        **keys,
        "cost_minor": int(precise.to_integral_value(ROUND_HALF_EVEN)),
        "cost_minor_precise": Decimal(plain_decimal(precise)),
        "currency": currency,
    }


def _rated_cost(
    conn: Connection, group_by: Sequence[str], window: ReportWindow, only: Only | None
) -> list[dict[str, Any]]:
    params: dict[str, Any] = {}
    narrowed = _only(only, params)
    end = _end(conn, window)
    start = window.start or datetime(1970, 1, 1, tzinfo=UTC)
    schedule = load_schedule(conn, recorded_by=window.as_of)
    if schedule.currency is None:
        return []
    periods = calendar_days() if "day" in group_by else calendar_months()
    params.update({"from": start, "to": end, "as_of": window.as_of, "workspaces": _scope(window)})
    rows = conn.execute(
        text(_occupancies() + _IN_SCOPE + narrowed + " AND (ended_at IS NULL OR ended_at > :from)"),
        params,
    ).all()
    sums: dict[tuple[Any, ...], int] = {}
    for row in rows:
        occ = occupancy_from_row(row)
        a = max(occ.start, start)
        b = min(occ.end or end, end)
        if b <= a:
            continue
        try:
            rating = rate_interval(occ, schedule, a, b, periods)
        except NoApplicableRate as exc:
            raise Invalid(f"cannot rate occupancy {occ.occupancy_id}: {exc}") from None
        for line in rating.lines:
            attrs = {
                "workspace": occ.workspace,
                "quota": occ.quota or "-",
                "user": occ.user,
                "flavor": occ.flavor,
                "billing_mode": occ.billing_mode,
                "day": line.period,
                "month": line.period[:7],
                "job": occ.job_uid,
                "kind": occ.workload,
                "service": row.service or "-",
            }
            key = tuple(attrs[k] for k in group_by)
            sums[key] = sums.get(key, 0) + line.amount_precise
    check_report_rows(len(sums), hint=_TOO_MANY)
    return [
        cost_row(dict(zip(group_by, key, strict=True)), precise_decimal(v), schedule.currency)
        for key, v in sorted(sums.items())
    ]


def invoice_lines(conn: Connection, invoice_id: str) -> list[dict[str, Any]]:
    """An invoice's lines in order (``invoices show``; indexed by the primary key)."""
    return [
        dict(r)
        for r in conn.execute(
            text(
                "SELECT line_no, job_uid, resource, billing_mode, quantity, unit, rate, "
                "amount_minor, amount_precise, description, transaction_ids "
                "FROM billing_invoice_lines "
                "WHERE invoice_id = :i ORDER BY line_no"
            ),
            {"i": invoice_id},
        ).mappings()
    ]


def invoice_job_costs(conn: Connection, invoice_id: str) -> dict[int, list[dict[str, Any]]]:
    """Per line number, the jobs it sums: usage and cost at full precision (minor units).

    An invoice line aggregates a resource x billing mode x rate over all jobs and
    is rounded once; this is its breakdown, from the transactions the line names.
    """
    rows = conn.execute(
        text(
            "SELECT l.line_no, l.resource, t.job_uid, sum(t.usage) AS usage, "
            "sum(t.amount_minor) AS amount FROM billing_invoice_lines l "
            "CROSS JOIN LATERAL jsonb_array_elements_text(l.transaction_ids) AS x(id) "
            "JOIN billing_transactions t ON t.transaction_id = x.id "
            "WHERE l.invoice_id = :i GROUP BY l.line_no, l.resource, t.job_uid "
            "ORDER BY l.line_no, t.job_uid"
        ),
        {"i": invoice_id},
    ).all()
    out: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        if r.usage is None:  # no usage, so no job: a subscription's term, not a job's use
            continue
        out.setdefault(r.line_no, []).append(
            {
                "job_uid": r.job_uid,
                "quantity": to_decimal(usage_quantity(r.resource, int(r.usage))),
                "amount_minor_precise": Decimal(plain_decimal(Decimal(r.amount))),
            }
        )
    return out


def job_cost(conn: Connection, uid: str) -> list[dict[str, Any]]:
    """What job ``uid`` cost, per flavor x billing mode, at full precision (minor units).

    ``posted_*``: what the rater posted to the ledger (final segments and accruals);
    ``rated_*``: its occupancy facts rated now, open ones up to the cluster clock, so
    a running job's cost is current even between accruals. ``*_minor`` is the
    precise figure rounded half-even, for reading; invoices round per line, not per
    job (``invoice_job_costs`` is the breakdown of a line). Reads the billing
    projection as it stands: bring it up to date first.
    """
    out: dict[tuple[str, str, str], dict[str, Any]] = {}

    def row(flavor: str, mode: str, currency: str) -> dict[str, Any]:
        return out.setdefault(
            (flavor, mode, currency),
            {"flavor": flavor, "billing_mode": mode, "currency": currency,
             "posted_minor": 0, "posted_minor_precise": Decimal(0),
             "rated_minor": None, "rated_minor_precise": None},
        )  # fmt: skip

    for r in conn.execute(
        text(
            "SELECT flavor, billing_mode, currency, sum(amount_minor) AS amount "
            "FROM billing_usage_lines WHERE job_uid = :u GROUP BY 1, 2, 3"
        ),
        {"u": uid},
    ):
        item = row(r.flavor, r.billing_mode, r.currency)
        item["posted_minor_precise"] = Decimal(plain_decimal(Decimal(r.amount)))
        item["posted_minor"] = int(Decimal(r.amount).to_integral_value(ROUND_HALF_EVEN))
    schedule = load_schedule(conn)
    end = cluster_clock(conn)
    if schedule.currency is not None and end is not None:
        rated: dict[tuple[str, str], int] = {}
        occupancies = conn.execute(
            text(_occupancies() + " AND job_uid = :job"), {"to": end, "as_of": None, "job": uid}
        ).all()
        for occ_row in occupancies:
            occ = occupancy_from_row(occ_row)
            try:
                rating = rate_interval(occ, schedule, occ.start, max(occ.end or end, occ.start))
            except NoApplicableRate:
                continue  # dead-lettered by the rater too; posted figures still show
            key = (occ.flavor, occ.billing_mode)
            rated[key] = rated.get(key, 0) + rating.total_precise
        for (flavor, mode), precise in rated.items():
            item = row(flavor, mode, schedule.currency)
            item["rated_minor_precise"] = Decimal(plain_decimal(precise_decimal(precise)))
            item["rated_minor"] = round_precise(precise)
    return [out[k] for k in sorted(out)]
