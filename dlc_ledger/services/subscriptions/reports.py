"""``report subscriptions``: subscribed GPU-hours against their use, and who bears the cost.

Rows by ``group`` or ``month`` (group x month): subscribed, used (by the quotas drawing
on the group), lent (to idle-mode jobs of others, and what those paid), over (used
beyond what was bought) and idle GPU-hours; utilisation; the subscriptions' cost in the
window and the effective cost per used GPU-hour. By ``quota`` or ``workspace``: the
showback of each group's cost to the quotas that draw on it (and their workspaces), by
guarantee (their share of the guaranteed GPUs) and by use (their share of the GPU-hours
used). By ``term``: each term's node-hours subscribed, delivered and not delivered beyond
its SLA grace, and its SLA credit (booked, or what it comes to so far). Rules:
docs/subscriptions.md, "Are we using what we pay for?" and "SLA credits".
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

from dlc_ledger.services.quotas import current_tree
from ledger.canonical import format_timestamp
from ledger.errors import Invalid
from ledger.money import to_decimal
from ledger.store.base import EventStore
from ledger.subscriptions import drawing_groups
from ledger.subscriptions.sla import credit_minor
from ledger.subscriptions.utilisation import GroupMonth, subscription_cost, utilisation
from processes.subscriptions.sla import assessed_terms, load_deliveries
from projections.billing import load_schedule
from projections.subscriptions import gpu_spans, load_specs, load_subscriptions

__all__ = ["GROUP_BY", "subscription_report", "term_credits"]

GROUP_BY = ("group", "month", "quota", "workspace", "term")
_GPU_HOUR = Fraction(3_600_000)  # mGPU x seconds


def _hours(value: Fraction) -> str:
    return f"{to_decimal(value / _GPU_HOUR).quantize(Decimal('0.01'))}"


def _money(value: Fraction) -> int:
    return round(value)


def subscription_report(
    store: EventStore, group_by: str, start: datetime, end: datetime
) -> list[dict[str, Any]]:
    """The report's rows over ``[start, end)`` (cluster time), grouped by ``group_by``."""
    if group_by not in GROUP_BY:
        raise Invalid(f"--group-by must be one of {', '.join(GROUP_BY)}, got {group_by!r}")
    subs = list(load_subscriptions(store).values())
    if end <= start or not subs:
        return []  # an empty window, or nothing bought: nothing to weigh
    if group_by == "term":
        return _term_rows(store, subs, start, end)
    tree = current_tree(store)
    drawn = drawing_groups(tree.specs)
    with store.reading() as conn:
        schedule = load_schedule(conn)
        spans = gpu_spans(conn, start, end)

    def idle_rate(at: datetime) -> Decimal | None:
        try:
            return schedule.rate_at("gpu/any", "idle", at).rate
        except LookupError:
            return None

    figures = utilisation(subs, spans, drawn, start, end, idle_rate)
    currency = subs[0].currency
    scale = subs[0].scale
    cost: dict[tuple[str, str], int] = defaultdict(int)
    for sub in subs:
        for month, minor in subscription_cost(sub, start, end).items():
            cost[(sub.group, month)] += minor
    keys = sorted(set(figures.months) | set(cost))
    if group_by in ("group", "month"):
        return _capacity_rows(figures.months, cost, keys, group_by, currency, scale)
    return _showback_rows(figures.months, cost, keys, tree, drawn, group_by, currency)


_NODE_HOUR_US = 3_600_000_000


def _node_hours(node_us: int) -> str:
    return f"{(Decimal(node_us) / _NODE_HOUR_US).quantize(Decimal('0.01'))}"


def term_credits(
    store: EventStore, subscription_id: str, at: datetime
) -> dict[int, dict[str, Any]]:
    """Each term's SLA credit of one subscription as of ``at`` (``subscriptions show``):
    ``sla`` (``credited``, ``pending``: what it comes to so far, ``none``: no commitment),
    ``undelivered_node_hours`` and ``sla_credit_minor`` (None: no commitment). The same read
    as ``report subscriptions --group-by term``, over every subscription of the store: the
    other subscriptions of its group count (the latest purchase is short first). A term
    not yet served by ``at`` is pending at zero when its book states a commitment."""
    subs = list(load_subscriptions(store).values())
    sub = next((s for s in subs if s.subscription_id == subscription_id), None)
    if sub is None:
        return {}
    rows = {
        r["term"]: r
        for r in _term_rows(store, subs, sub.starts_at, at)
        if r["subscription"] == subscription_id
    }
    specs = load_specs(store)
    out: dict[int, dict[str, Any]] = {}
    for term in sub.terms:
        row = rows.get(term.term)
        if row is not None:
            status, hours, minor = (
                row["sla"],
                row["undelivered_node_hours"],
                row["sla_credit_minor"],
            )
        elif specs.sla_of(sub.spec, term.book_id, term.ordered_at) is None:
            status, hours, minor = "none", _node_hours(0), None
        elif term.starts_at >= min(term.ends_at, sub.ends_at):
            status, hours, minor = "none", _node_hours(0), None  # never served: nothing owed
        else:
            status, hours, minor = "pending", _node_hours(0), 0
        out[term.term] = {"sla": status, "undelivered_node_hours": hours, "sla_credit_minor": minor}
    return out


def _term_rows(
    store: EventStore, subs: list[Any], start: datetime, end: datetime
) -> list[dict[str, Any]]:
    """One row per term served in ``[start, end)``: its delivery up to ``end`` (or its end)
    and its SLA credit: ``credited`` when booked by ``end``, else ``pending`` (what it
    comes to so far), ``none`` when its book states no commitment."""
    specs = load_specs(store)
    booked = assessed_terms(store)
    by_id = {s.subscription_id: s for s in subs}
    rows = []
    for d in load_deliveries(store, subs, specs, end):
        if d.ends_at <= start:
            continue
        sub = by_id[d.subscription_id]
        credit = booked.get((d.subscription_id, d.term.term))
        if d.grace_minutes is None:
            status, minor = "none", None
        elif credit is not None and credit.ends_at + timedelta(minutes=credit.grace_minutes) <= end:
            status, minor = "credited", credit.amount_minor  # booked by the window's end
        else:
            status, minor = "pending", credit_minor(sub, d)
        rows.append(
            {
                "subscription": d.subscription_id,
                "term": d.term.term,
                "group": sub.group,
                "spec": sub.spec,
                "workspace": sub.workspace,
                "starts_at": format_timestamp(d.starts_at),
                "ends_at": format_timestamp(d.ends_at),
                "nodes": d.nodes,
                "grace_minutes": "" if d.grace_minutes is None else d.grace_minutes,
                "subscribed_node_hours": _node_hours(d.subscribed_us),
                "delivered_node_hours": _node_hours(d.delivered_us),
                "undelivered_node_hours": _node_hours(d.undelivered_us),
                "sla_credit_minor": minor,
                "sla": status,
                "currency": sub.currency,
            }
        )
    rows.sort(key=lambda r: (r["group"], r["starts_at"], r["subscription"], r["term"]))
    return rows


def _capacity_rows(
    months: dict[tuple[str, str], GroupMonth],
    cost: dict[tuple[str, str], int],
    keys: list[tuple[str, str]],
    group_by: str,
    currency: str,
    scale: int,
) -> list[dict[str, Any]]:
    merged: dict[tuple[str, ...], tuple[GroupMonth, int]] = {}
    for group, month in keys:
        key: tuple[str, ...] = (group,) if group_by == "group" else (group, month)
        acc, minor = merged.get(key, (GroupMonth(), 0))
        one = months.get((group, month), GroupMonth())
        acc.subscribed += one.subscribed
        acc.used += one.used
        acc.over += one.over
        acc.lent += one.lent
        acc.lent_paid += one.lent_paid
        merged[key] = (acc, minor + cost.get((group, month), 0))
    rows = []
    for key, (acc, minor) in merged.items():
        used_hours = acc.used / _GPU_HOUR
        per_hour = (
            f"{to_decimal(Fraction(minor, 10**scale) / used_hours).quantize(Decimal('0.01'))}"
            if used_hours
            else ""
        )
        row: dict[str, Any] = dict(zip(("group", "month"), key, strict=False))
        row.update(
            {
                "subscribed_gpu_hours": _hours(acc.subscribed),
                "used_gpu_hours": _hours(acc.used),
                "lent_gpu_hours": _hours(acc.lent),
                "lent_paid_minor": _money(acc.lent_paid * 10**scale),
                "idle_gpu_hours": _hours(acc.idle),
                "over_gpu_hours": _hours(acc.over),
                "utilisation": _percent(acc.used + acc.lent, acc.subscribed),
                "cost_minor": minor,
                "cost_per_used_gpu_hour": per_hour,
                "currency": currency,
            }
        )
        rows.append(row)
    return rows


def _percent(part: Fraction, whole: Fraction) -> str:
    if not whole:
        return ""
    return f"{to_decimal(part / whole * 100).quantize(Decimal('0.1'))}%"


def _gpu_min(amounts: dict[str, int]) -> int:
    return sum(q for k, q in amounts.items() if k.startswith("gpu/"))


def _showback_rows(
    months: dict[tuple[str, str], GroupMonth],
    cost: dict[tuple[str, str], int],
    keys: list[tuple[str, str]],
    tree: Any,
    drawn: dict[str, tuple[str, ...]],
    group_by: str,
    currency: str,
) -> list[dict[str, Any]]:
    workspaces: dict[str, list[str]] = defaultdict(list)
    for ws, quota in tree.bindings.items():
        workspaces[quota].append(ws)
    # who bears a group's cost: the quotas drawing on it that workspaces are bound to
    bearers = {q for q in drawn if drawn[q] and workspaces.get(q)}
    used: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
    by_use: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
    by_guarantee: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
    for group, month in keys:
        minor = cost.get((group, month), 0)
        one = months.get((group, month), GroupMonth())
        mine = sorted(q for q in bearers if group in drawn[q])
        total_used = sum((one.by_quota.get(q, Fraction(0)) for q in mine), Fraction(0))
        weights = {q: _gpu_min(tree.specs[q].min) for q in mine}
        total_weight = sum(weights.values())
        for q in mine:
            key = (q, group)
            used[key] += one.by_quota.get(q, Fraction(0))
            if total_used:
                by_use[key] += Fraction(minor) * one.by_quota.get(q, Fraction(0)) / total_used
            if total_weight:
                by_guarantee[key] += Fraction(minor) * weights[q] / total_weight
            elif mine:
                by_guarantee[key] += Fraction(minor, len(mine))
    rows = []
    for quota, group in sorted(used):
        who = (
            sorted(workspaces[quota])
            if group_by == "workspace"
            else [", ".join(sorted(workspaces[quota]))]
        )
        share = len(who)
        for ws in who:
            row: dict[str, Any] = (
                {"workspace": ws, "quota": quota}
                if group_by == "workspace"
                else {"quota": quota, "workspaces": ws}
            )
            row.update(
                {
                    "group": group,
                    "used_gpu_hours": _hours(used[(quota, group)] / share),
                    "cost_by_use_minor": _money(by_use[(quota, group)] / share),
                    "cost_by_guarantee_minor": _money(by_guarantee[(quota, group)] / share),
                    "currency": currency,
                }
            )
            rows.append(row)
    return rows
