"""``dlc-ledger report …``: the one Typer group every read-model report hangs under.

Report commands live beside the projection they read (``consumers/*_cli.py``) and
register themselves on :data:`report_app`; :mod:`consumers.cli` imports them.
"""

from __future__ import annotations

import typer

__all__ = ["report_app"]

report_app = typer.Typer(
    help="Reports over the projections (table, JSON, CSV).", no_args_is_help=True
)
