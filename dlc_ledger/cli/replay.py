"""``dlc-ledger replay``: a public GPU trace through kubesim, the watchers, Kafka and the store."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from dlc_ledger.cli.options import CLUSTER, parse_instant
from dlc_ledger.wiring import context
from dlc_ledger.wiring.logs import configure_logging
from dlc_ledger.wiring.replay import run_replay
from dlc_ledger.wiring.runs import OPEN_LOOP
from ledger.quotas.document import QUEUE_POLICIES

__all__ = [
    "TraceFormat",
    "default_run_name",
    "parse_policy",
    "parse_scale",
    "parse_speed",
    "parse_window",
    "replay",
    "trace_format",
]


class TraceFormat(StrEnum):
    openb = "openb"
    dlrm = "dlrm"
    #: both bundled traces on one cluster (training jobs and inference services)
    openb_dlrm = "openb+dlrm"


def parse_speed(value: str) -> float | str:
    if value == "max":
        return "max"
    try:
        speed = float(value)
    except ValueError as exc:
        raise typer.BadParameter("--speed is 'max' or a positive number") from exc
    if speed <= 0:
        raise typer.BadParameter("--speed is 'max' or a positive number")
    return speed


def trace_format(trace: str, fmt: TraceFormat | None) -> TraceFormat:
    """``--format``, or the bundled trace's own when ``--trace`` names one."""
    if fmt is not None:
        return fmt
    if trace in {f.value for f in TraceFormat}:
        return TraceFormat(trace)
    raise typer.BadParameter(
        f"--trace {trace} is a file: pass --format openb or dlrm", param_hint="--format"
    )


def replay(
    trace: Annotated[
        str,
        typer.Option(
            help="Trace CSV file, or 'openb' / 'dlrm' for the bundled traces, or 'openb+dlrm'"
            " for both on one cluster (training jobs and inference services)."
        ),
    ],
    fmt: Annotated[
        TraceFormat | None,
        typer.Option("--format", help="Trace format (default: the bundled trace's own)."),
    ] = None,
    nodes: Annotated[Path | None, typer.Option(help="openb node list CSV.")] = None,
    epoch: Annotated[
        str | None,
        typer.Option(help=f"Trace second 0 (default 2026-11-01), {CLUSTER}."),
    ] = None,
    speed: Annotated[str, typer.Option(help="'max' or a multiple of real time.")] = "max",
    quotas: Annotated[Path | None, typer.Option(help="Quota tree to apply first.")] = None,
    pricebook: Annotated[Path | None, typer.Option(help="Price book to publish first.")] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="Start from an empty database.")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm --fresh on DATABASE_URL.")] = False,
    limit: Annotated[int | None, typer.Option(help="Only the first N trace rows.")] = None,
    partitions: Annotated[
        int | None,
        typer.Option(
            min=1, max=256, help="Partitions of the replay topic (default DLC_PARTITIONS)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    closed_loop: Annotated[
        bool,
        typer.Option(
            "--closed-loop",
            help="Jobs arrive suspended; the dispatcher admits and preempts them against"
            " --quotas, in lockstep with virtual time (--speed does not apply).",
        ),
    ] = False,
    cycle: Annotated[
        float,
        typer.Option(
            min=1, help="--closed-loop: seconds of virtual time between dispatcher cycles."
        ),
    ] = 60.0,
    window: Annotated[
        str | None,
        typer.Option(
            metavar="FROM/TO",
            help=f"Only the rows created in this window of cluster time ({CLUSTER}), e.g. "
            "2027-03-11T00:00Z/2027-03-12T00:00Z.",
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            help=f"--closed-loop: stop at this instant ({CLUSTER}), jobs left running and "
            "queued as they are (the default runs until every job ended)."
        ),
    ] = None,
    live: Annotated[
        str | None,
        typer.Option(
            metavar="FROM/TO",
            help=f"--closed-loop: play the whole trace open loop as history, then a copy of"
            f" the rows created in this window ({CLUSTER}), renamed <job>-live, from the first"
            " full hour after the trace's end, under the dispatcher, in the same run.",
        ),
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option(
            help="Every queue of --quotas under this policy (FIFO, StrictFIFO, BestEffortFIFO, "
            "Priority, Balance, Intelligent, RoundRobin): a what-if."
        ),
    ] = None,
    scale_quotas: Annotated[
        str | None,
        typer.Option(
            metavar="FACTOR",
            help="Every quantity of --quotas times FACTOR (0.25: a quarter of the GPUs).",
        ),
    ] = None,
) -> None:
    """Replay a trace end to end; exit 0 once everything is stored and projected.

    An open-loop replay writes into the run named by --run (default open-loop: the
    configured database); a closed-loop one into its own run (default closed-loop, or
    what-if-<policy> with --policy), emptied first, which reports then read by default."""
    if closed_loop and quotas is None:
        raise typer.BadParameter(
            "--closed-loop needs a quota tree to dispatch against", param_hint="--quotas"
        )
    if closed_loop and speed != "max":
        raise typer.BadParameter(
            "--closed-loop moves in lockstep with the dispatcher", param_hint="--speed"
        )
    configure_logging(logging.WARNING, "%(levelname)s %(name)s %(message)s")
    run = context.run_choice or default_run_name(closed_loop, policy)
    summary = run_replay(
        trace,
        trace_format(trace, fmt).value,
        nodes=nodes,
        epoch=None if epoch is None else parse_instant(epoch, option="--epoch"),
        speed=parse_speed(speed),  # type: ignore[arg-type]
        quotas=quotas,
        pricebook=pricebook,
        fresh=fresh,
        yes=yes,
        limit=limit,
        partitions=partitions,
        closed_loop=closed_loop,
        cycle=cycle,
        window=None if window is None else parse_window(window),
        policy=None if policy is None else parse_policy(policy),
        scale=None if scale_quotas is None else parse_scale(scale_quotas),
        run=run,
        until=None if until is None else parse_instant(until, option="--until"),
        live=None if live is None else parse_window(live, option="--live"),
    )
    if as_json:
        typer.echo(json.dumps(summary.as_dict()))
    else:
        for line in summary.lines():
            typer.echo(line)
    if not summary.ok:
        typer.echo("replay incomplete: the store does not match the trace", err=True)
        raise typer.Exit(1)
    if run != OPEN_LOOP and not as_json:
        typer.echo(
            f"stored as run {run}: reports and the API now read it "
            "(dlc-ledger runs lists the runs; --run open-loop reads the open-loop one)"
        )


def default_run_name(closed_loop: bool, policy: str | None) -> str:
    """The run a replay writes into when --run names none."""
    if not closed_loop:
        return OPEN_LOOP
    return "closed-loop" if policy is None else f"what-if-{policy.lower()}"


def parse_window(text: str, option: str = "--window") -> tuple[datetime, datetime]:
    start, sep, end = text.partition("/")
    if not sep:
        raise typer.BadParameter("a window is FROM/TO (two instants)", param_hint=option)
    return parse_instant(start, option=option), parse_instant(end, option=option)


def parse_policy(text: str) -> str:
    for name in QUEUE_POLICIES:
        if name.lower() == text.lower():
            return name
    raise typer.BadParameter(
        f"{text!r} is not one of {', '.join(QUEUE_POLICIES)}", param_hint="--policy"
    )


def parse_scale(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        value = Decimal(0)
    if not value.is_finite() or not Decimal(0) < value <= Decimal(1000):
        raise typer.BadParameter("a number above 0 (at most 1000)", param_hint="--scale-quotas")
    return value
