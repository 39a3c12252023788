"""Prepaid cost beside pay-as-you-go: ``report cost --with-prepaid``, ``/v1/cost?with_prepaid``
and ``/v1/month-to-date?with_prepaid``.

A workspace that runs on subscribed capacity pays nothing per job, so the cost reports
showed it at 0.00. This reads the subscriptions and the quota tree's history from the
store and attributes each group's recognised revenue of the window to the workspaces by
guarantee (the rule and its rounding: :mod:`ledger.subscriptions.showback`,
docs/subscriptions.md "Showback of prepaid cost"), then sets it beside the cost rows as
``prepaid_minor``. Reads only: nothing is projected or appended.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from dlc_ledger.services.clocks import billing_instant
from ledger.catalogue import decode
from ledger.errors import Invalid
from ledger.store.base import EventStore, UnitOfWork, read_all_of_types
from ledger.subscriptions.showback import UNATTRIBUTED, TreeTimeline, showback
from projections.billing import ReportWindow, cost_row
from projections.subscriptions import load_subscriptions

__all__ = [
    "PREPAID_KEYS",
    "TREE_TYPES",
    "add_prepaid",
    "check_keys",
    "load_tree_timeline",
    "prepaid",
    "with_prepaid",
]

#: The keys prepaid cost can be grouped by: it is attributed to workspaces (through their
#: quotas), per month; it has no job, user, flavor or day of its own.
PREPAID_KEYS = ("workspace", "quota", "month")
#: The events that shape the quota tree and its bindings.
TREE_TYPES = ("QuotaCreated", "QuotaChanged", "QuotaDeleted", "WorkspaceBound")

Source = EventStore | UnitOfWork


def load_tree_timeline(source: Source) -> TreeTimeline:
    """The quota tree at every instant, from its events (cluster time)."""
    return TreeTimeline(
        (r.envelope.occurred_at, decode(r.envelope)) for r in read_all_of_types(source, TREE_TYPES)
    )


def check_keys(group_by: Sequence[str]) -> None:
    bad = [k for k in group_by if k not in PREPAID_KEYS]
    if bad:
        raise Invalid(
            f"prepaid cost is attributed by {', '.join(PREPAID_KEYS)} only, not "
            f"{', '.join(bad)}: drop --with-prepaid or group by those"
        )


def prepaid(
    source: Source,
    group_by: Sequence[str],
    start: datetime | None,
    end: datetime,
    *,
    workspaces: Collection[str] | None = None,
) -> dict[tuple[Any, ...], int]:
    """Prepaid cost recognised in ``[start, end)`` (``start`` None: since the first
    subscription), by the group keys (of :data:`PREPAID_KEYS`) and currency: the key
    tuple is the keys' values then the currency. ``workspaces``: only theirs (a scoped
    reader's), the unattributed part left out; None: every workspace and
    ``(unattributed)``."""
    check_keys(group_by)
    subs = sorted(load_subscriptions(source).values(), key=lambda s: s.subscription_id)
    if not subs:
        return {}
    begin = start or min(s.starts_at for s in subs)
    if end <= begin:
        return {}
    shares = showback(subs, load_tree_timeline(source), begin, end, by_month="month" in group_by)
    out: dict[tuple[Any, ...], int] = defaultdict(int)
    for (_group, currency, month), parts in shares.items():
        for (workspace, quota), minor in parts.items():
            if workspaces is not None and (
                workspace == UNATTRIBUTED or workspace not in workspaces
            ):
                continue
            values = {"workspace": workspace, "quota": quota, "month": month}
            out[(*(values[k] for k in group_by), currency)] += minor
    return dict(out)


def with_prepaid(
    rows: list[dict[str, Any]],
    amounts: dict[tuple[Any, ...], int],
    group_by: Sequence[str],
) -> list[dict[str, Any]]:
    """Cost ``rows`` with ``prepaid_minor`` beside ``cost_minor`` (0 where none), and a row
    (its cost 0) for each group with prepaid cost only; sorted by the keys, then currency."""
    left = dict(amounts)
    out = []
    for row in rows:
        key = (*(row[k] for k in group_by), row["currency"])
        out.append(_add(row, left.pop(key, 0)))
    for key, minor in left.items():
        blank: dict[str, Any] = dict(zip(group_by, key[:-1], strict=True))
        template = rows[0] if rows else cost_row({}, Decimal(0), None)
        for name in template:
            if name in group_by or name == "currency":
                continue
            blank[name] = Decimal(0) if name.endswith("_precise") else 0
        blank["currency"] = key[-1]
        out.append(_add(blank, minor))
    return sorted(out, key=lambda r: (*(str(r[k] or "") for k in group_by), str(r["currency"])))


def _add(row: dict[str, Any], minor: int) -> dict[str, Any]:
    currency = row["currency"]
    item = {k: v for k, v in row.items() if k != "currency"}
    item["prepaid_minor"] = minor
    item["currency"] = currency
    return item


def add_prepaid(
    store: EventStore,
    rows: list[dict[str, Any]],
    group_by: Sequence[str],
    window: ReportWindow,
) -> list[dict[str, Any]]:
    """A cost report's ``rows`` with their prepaid cost over the report's window: from
    ``window.start`` (else the first subscription's start) to ``window.end`` (else the
    instant a billing run would act at now: the days ended by then). Its scope is the
    window's. ``as_of`` is refused: the attribution reads the store at its head."""
    check_keys(group_by)
    if window.as_of is not None:
        raise Invalid("--with-prepaid reads the subscriptions as they stand: drop --as-of")
    end = window.end or billing_instant(store, None).at
    amounts = prepaid(store, group_by, window.start, end, workspaces=window.workspaces)
    return with_prepaid(rows, amounts, group_by)
