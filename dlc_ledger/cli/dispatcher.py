"""``dlc-ledger dispatcher simulate --scenario FILE``: one decision from plain data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from dlc_ledger.services.dispatch import simulate_file

__all__ = ["dispatcher_app"]

dispatcher_app = typer.Typer(
    help="The dispatcher: admission and preemption decisions (Kueue semantics).",
    no_args_is_help=True,
)


@dispatcher_app.command("simulate")
def simulate(
    scenario: Annotated[
        Path,
        typer.Option(
            "--scenario",
            help="Scenario YAML (quota tree, admitted jobs, one incoming job or pending ones).",
        ),
    ],
) -> None:
    """Decide one incoming job and print {"job", "outcome", "victims"} as JSON; a cycle
    scenario (``pending:``) prints its cycles and preemption report (data/scenarios/README.md)."""
    decision = simulate_file(scenario)
    typer.echo(json.dumps(decision.as_document()))
