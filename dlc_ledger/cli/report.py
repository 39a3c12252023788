"""``dlc-ledger report …``: the one Typer group every read-model report hangs under.

Report commands live in the command module of the projection they read; the
group names them here and imports a command's module only when it is used
(:mod:`dlc_ledger.cli.lazy_groups`).
"""

from __future__ import annotations

import typer

from dlc_ledger.cli.lazy_groups import lazy_group

__all__ = ["REPORTS", "report_app"]

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
}

report_app = typer.Typer(
    cls=lazy_group(REPORTS),
    help="Reports over the projections (table, JSON, CSV).",
    no_args_is_help=True,
)
