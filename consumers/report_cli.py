"""``dlc-ledger report …``: the one Typer group every read-model report hangs under.

Report commands live beside the projection they read (``consumers/*_cli.py``); the
group names them here and imports a command's module only when it is used
(:mod:`consumers.lazy_groups`).
"""

from __future__ import annotations

import typer

from consumers.lazy_groups import lazy_group

__all__ = ["REPORTS", "report_app"]

REPORTS = {
    "usage": "consumers.finance_cli:report_usage",
    "cost": "consumers.finance_cli:report_cost",
    "quota-usage": "consumers.quotas_cli:quota_usage_report",
    "quota-history": "consumers.quotas_cli:quota_history_report",
    "occupancy": "consumers.jobs_cli:report_occupancy",
    "inventory": "consumers.jobs_cli:report_inventory",
}

report_app = typer.Typer(
    cls=lazy_group(REPORTS),
    help="Reports over the projections (table, JSON, CSV).",
    no_args_is_help=True,
)
