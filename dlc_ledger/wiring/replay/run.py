"""``run_replay``: a replay's steps in order, from the trace to play to the projected store.

Resolve the trace, open (and if asked, reset) the database, pick its replay topic, apply the
price book and quota tree, run the pipeline (or, ``closed_loop``, the pipeline in lockstep
with the dispatcher: :mod:`~.closed_loop`), check the store against the trace, project.
The steps live in the sibling modules (see :mod:`dlc_ledger.wiring.replay`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from dlc_ledger.wiring.replay.closed_loop import (
    DispatcherFactory,
    closed_loop_figures,
    run_closed_loop,
)
from dlc_ledger.wiring.replay.database import replay_topic, reset_database, upgrade_if_behind
from dlc_ledger.wiring.replay.dispatcher import default_dispatcher
from dlc_ledger.wiring.replay.pipeline import PipelineSite, run_pipeline
from dlc_ledger.wiring.replay.reference_data import apply_reference_data
from dlc_ledger.wiring.replay.verify import ReplaySummary, StoreCounts, check_store
from kubesim.driver import Speed
from kubesim.traces import (
    DLRM_CSV,
    OPENB_NODES_CSV,
    OPENB_PODS_CSV,
    Trace,
    load_dlrm,
    load_openb,
)
from ledger.errors import Invalid
from ledger.store.postgres import PostgresEventStore

__all__ = ["load_replay_trace", "run_replay"]


def load_replay_trace(
    trace: str | Path,
    fmt: str,
    *,
    nodes: str | Path | None = None,
    epoch: datetime | None = None,
    limit: int | None = None,
) -> Trace:
    """A trace file (or ``openb`` / ``dlrm`` for the bundled ones) in the given format."""
    from kubesim.clock import DEFAULT_EPOCH

    at = epoch or DEFAULT_EPOCH
    path = str(trace)
    if fmt == "openb":
        pods = OPENB_PODS_CSV if path == "openb" else Path(path)
        loaded = load_openb(pods, Path(nodes) if nodes else OPENB_NODES_CSV, at)
    elif fmt == "dlrm":
        loaded = load_dlrm(DLRM_CSV if path == "dlrm" else Path(path), at)
    else:
        raise Invalid(f"unknown trace format {fmt!r} (openb or dlrm)")
    return loaded.head(limit) if limit else loaded


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_replay(
    trace: str | Path = "openb",
    fmt: str = "openb",
    *,
    nodes: str | Path | None = None,
    epoch: datetime | None = None,
    speed: Speed = "max",
    quotas: Path | None = None,
    pricebook: Path | None = None,
    subscriptions: Path | None = None,
    fresh: bool = False,
    yes: bool = False,
    limit: int | None = None,
    partitions: int | None = None,
    store: PostgresEventStore | None = None,
    bootstrap: str | None = None,
    data_dir: Path | None = None,
    project: bool = True,
    progress: Callable[[str], None] | None = _stderr,
    progress_interval: float = 2.0,
    timeout: float = 3_600.0,
    closed_loop: bool = False,
    cycle: float = 60.0,
    make_dispatcher: DispatcherFactory | None = None,
) -> ReplaySummary:
    """Replay ``trace`` end to end (:mod:`dlc_ledger.wiring.replay`). Raises on a stalled
    pipeline."""
    from dlc_ledger.wiring import context

    say = progress or (lambda _line: None)
    started_wall = time.monotonic()
    loaded = load_replay_trace(trace, fmt, nodes=nodes, epoch=epoch, limit=limit)
    if closed_loop and quotas is None:
        raise Invalid("--closed-loop needs --quotas: the dispatcher decides against a tree")
    own_store = store is None
    if fresh and context.settings().database_url and store is None and not yes:
        raise Invalid(
            "--fresh drops every table of the database at DATABASE_URL; add --yes to confirm"
        )
    if store is None:  # a dev tool: it may bring a configured database's schema up to date
        store = context.open_store(create=True, check=False)
        upgrade_if_behind(store)
    try:
        if fresh:
            reset_database(store)
            say("fresh: dropped and recreated the database schema")
        bootstrap = bootstrap or context.kafka_bootstrap()
        partitions = partitions or context.settings().partitions
        topic = replay_topic(store, bootstrap, partitions)
        apply_reference_data(store, quotas, pricebook, loaded.epoch, say, subscriptions)
        summary = ReplaySummary.expected(loaded, f"replay-{loaded.name}", topic)
        before = StoreCounts.read(store)
        site = PipelineSite(
            store,
            bootstrap,
            topic,
            partitions,
            data_dir or context.settings().data_dir,
            summary.cluster,
        )
        if closed_loop:
            loop = run_closed_loop(
                loaded,
                site,
                say,
                progress_interval,
                timeout,
                cycle_seconds=cycle,
                make_dispatcher=make_dispatcher or default_dispatcher,
            )
            summary.published, summary.ingested = loop.published, loop.ingested
            summary.virtual_seconds = loop.virtual_seconds
        else:
            run = run_pipeline(loaded, site, speed, say, progress_interval, timeout)
            summary.published = run.published
            summary.ingested = run.ingested
            summary.virtual_seconds = run.virtual_seconds
        check_store(summary, store, before)
        if project:
            try:
                from consumers.projector import Projector
                from projections.registry import all_projections
            except ImportError:
                summary.notes.append("projections skipped: no projection registry")
            else:
                say("projecting ...")
                Projector(store, all_projections()).catch_up()
                summary.projected = True
        if closed_loop:
            summary.closed_loop = closed_loop_figures(store, loop)
        summary.wall_seconds = time.monotonic() - started_wall
        return summary
    finally:
        if own_store:
            store.close()
