"""``dlc-ledger report …``: the one Typer group every read-model report hangs under.

Report commands live in the command module of the projection they read; the
group names them here and imports a command's module only when it is used
(:mod:`dlc_ledger.cli.lazy_groups`).
"""

from __future__ import annotations

import typer

from dlc_ledger.cli.lazy_groups import lazy_group

__all__ = ["REPORTS", "SUMMARIES", "report_app"]

REPORTS = {
    "usage": "dlc_ledger.cli.finance:report_usage",
    "cost": "dlc_ledger.cli.finance:report_cost",
    "quota-usage": "dlc_ledger.cli.quotas:quota_usage_report",
    "quota-history": "dlc_ledger.cli.quotas:quota_history_report",
    "quota-series": "dlc_ledger.cli.quotas:quota_series_report",
    "occupancy": "dlc_ledger.cli.jobs:report_occupancy",
    "inventory": "dlc_ledger.cli.jobs:report_inventory",
    "estimates": "dlc_ledger.cli.queue:report_estimates",
    "waits": "dlc_ledger.cli.dispatch_reports:report_waits",
    "preemptions": "dlc_ledger.cli.dispatch_reports:report_preemptions",
    "goodput": "dlc_ledger.cli.dispatch_reports:report_goodput",
    "subscriptions": "dlc_ledger.cli.subscription_reports:report_subscriptions",
}

SUMMARIES = {
    "usage": "Exact occupied usage (mGPU·s, CPU milli·s, MiB·s), grouped.",
    "cost": (
        "Cost, grouped (from the ledger, or rated from the facts): minor units, currency, "
        "scale and the decimal amount."
    ),
    "quota-usage": (
        "Per quota node x flavor: min, max, used, borrowed, lent, queued demand, job counts."
    ),
    "quota-history": (
        "Quota usage over a window of cluster time, for charts: one row per quota node x "
        "flavor x step, the figures at the step's start (UTC hours or days)."
    ),
    "quota-series": (
        "One quota node's usage per flavor at each step's start over a window (a chart's "
        "series): min, max, used, borrowed, lent, queued demand, pending and running "
        "jobs."
    ),
    "occupancy": "Resources occupied at an instant (intervals are [start, end)), per group.",
    "inventory": "Nodes and schedulable capacity (cordoned and removed nodes excluded), per group.",
    "estimates": (
        "Start estimates against actual starts: for each wait, the first estimate and range "
        "stored with a pending decision vs its admission; waits, estimated, absolute error "
        "p50 / p95 / mean and mean error in seconds, and the range's calibration: how many "
        "waits had one and the shares that started inside, below and above it, per quota."
    ),
    "waits": (
        "Waits from queued (submitted, or preempted: a requeue is a new wait) to "
        "admitted: count, p50/p95/max/mean seconds by quota and priority, for waits that "
        "ended in the window; ``waiting``: jobs still queued."
    ),
    "preemptions": (
        "Every preemption decided in the window: preemptor, victim, reason, and the "
        "victim's GPU-hours lost (its pods open at the decision, as `jobs why` shows) "
        "with their cost at its rate."
    ),
    "goodput": (
        "Occupied time that ended in success over all occupied time (GPU-weighted and "
        "plain), for occupancies that ended in the window, by quota or workspace."
    ),
    "subscriptions": (
        "Subscribed GPU-hours vs used by the quotas' own jobs, lent to idle-mode jobs of "
        "others (and what they paid), idle; cost and cost per used GPU-hour; by quota or "
        "workspace, each group's cost shown back by guarantee and by use."
    ),
}

report_app = typer.Typer(
    cls=lazy_group(REPORTS, SUMMARIES),
    help="Reports over the projections (table, JSON, CSV).",
    no_args_is_help=True,
)
