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
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

from dlc_ledger.wiring.replay.closed_loop import (
    DispatcherFactory,
    closed_loop_figures,
    run_closed_loop,
)
from dlc_ledger.wiring.replay.database import replay_topic, reset_database, upgrade_if_behind
from dlc_ledger.wiring.replay.dispatcher import default_dispatcher
from dlc_ledger.wiring.replay.pipeline import PipelineSite, run_pipeline
from dlc_ledger.wiring.replay.reference_data import apply_reference_data, reshaped_tree
from dlc_ledger.wiring.replay.verify import ReplaySummary, StoreCounts, check_store, check_usage
from dlc_ledger.wiring.runs import OPEN_LOOP, RunRecord, Runs, create_run_database
from kubesim.driver import Speed
from kubesim.traces import (
    DLRM_CSV,
    OPENB_NODES_CSV,
    OPENB_PODS_CSV,
    Trace,
    live_rows,
    load_dlrm,
    load_openb,
    load_trace,
)
from ledger.errors import Invalid
from ledger.store.postgres import PostgresEventStore

__all__ = ["COMBINED", "cluster_name", "describe_run", "load_replay_trace", "run_replay"]

#: the combined replay: openb training and DLRM inference on one cluster
COMBINED = "openb+dlrm"


def cluster_name(trace: Trace) -> str:
    """The cluster a replay of ``trace`` is watched as (``replay-openb-dlrm`` for both)."""
    return f"replay-{trace.name.replace('+', '-')}"


def load_replay_trace(
    trace: str | Path,
    fmt: str,
    *,
    nodes: str | Path | None = None,
    epoch: datetime | None = None,
    limit: int | None = None,
    window: tuple[datetime, datetime] | None = None,
) -> Trace:
    """A trace file (or ``openb`` / ``dlrm`` for the bundled ones) in the given format, or
    ``openb+dlrm``: both bundled traces on one cluster from one epoch (training jobs and
    inference services); ``window``: only the rows created in it (cluster time),
    ``limit``: the first N."""
    from kubesim.clock import DEFAULT_EPOCH

    at = epoch or DEFAULT_EPOCH
    path = str(trace)
    if fmt == "openb":
        pods = OPENB_PODS_CSV if path == "openb" else Path(path)
        loaded = load_openb(pods, Path(nodes) if nodes else OPENB_NODES_CSV, at)
    elif fmt == "dlrm":
        loaded = load_dlrm(DLRM_CSV if path == "dlrm" else Path(path), at)
    elif fmt == COMBINED:
        if path != COMBINED or nodes is not None:
            raise Invalid(f"{COMBINED} replays the bundled traces: --trace {COMBINED}, no --nodes")
        loaded = load_trace(COMBINED, at)
    else:
        raise Invalid(f"unknown trace format {fmt!r} (openb, dlrm or {COMBINED})")
    if window is not None:
        start, end = (round((t - at).total_seconds()) for t in window)
        if not 0 <= start < end:
            raise Invalid(
                f"the trace window {window[0]:%Y-%m-%dT%H:%MZ}/{window[1]:%Y-%m-%dT%H:%MZ} "
                f"must start at or after the trace's epoch ({at:%Y-%m-%dT%H:%MZ}) and "
                "before it ends"
            )
        loaded = loaded.between(start, end)
        if not loaded.instances:
            raise Invalid("no trace row is created in that window")
    return loaded.head(limit) if limit else loaded


def describe_run(
    run: str,
    trace: Trace,
    closed_loop: bool,
    policy: str | None,
    scale: Decimal | None,
    cycle: float,
    until: datetime | None = None,
    *,
    live_from: datetime | None = None,
) -> RunRecord:
    """What a run holds, in a line a reader of its reports can act on."""
    window = None
    if trace.window is not None:
        start, end = (trace.epoch + timedelta(seconds=s) for s in trace.window)
        window = f"{start:%Y-%m-%dT%H:%MZ}/{end:%Y-%m-%dT%H:%MZ}"
    how = [
        f"{'closed' if closed_loop else 'open'}-loop replay of {trace.name}",
        f"rows created {window}" if window else "the whole trace",
        f"{len(trace.instances):,} jobs",
    ]
    if live_from is not None:
        how.append(f"open loop until {live_from:%Y-%m-%dT%H:%MZ}, live (closed loop) from then")
    if closed_loop:
        how.append(f"every queue {policy}" if policy else "the tree's own queue policies")
        how.append(f"cycle {cycle:g} s")
        if until is not None:
            how.append(f"stopped at {until:%Y-%m-%dT%H:%MZ}")
    if scale is not None:
        how.append(f"quotas x {scale}")
    return RunRecord(
        name=run,
        description=", ".join(how),
        trace=trace.name,
        window=window,
        policy=policy,
        details={"jobs": len(trace.instances), "scale": None if scale is None else str(scale)},
    )


def _with_live_copy(trace: Trace, live: tuple[datetime, datetime]) -> tuple[Trace, datetime]:
    """``trace`` with the rows created in ``live`` copied after its end, and the instant
    the copies start (the first full hour after the trace's end). A service's copied rows
    stay replicas, of the service ``<service>-live``, scaled up and down under the
    dispatcher."""
    start, end = (round((t - trace.epoch).total_seconds()) for t in live)
    if not 0 <= start < end:
        raise Invalid(
            f"the live window {live[0]:%Y-%m-%dT%H:%MZ}/{live[1]:%Y-%m-%dT%H:%MZ} must start"
            " at or after the trace's epoch and before it ends"
        )
    if not any(start <= i.created < end for i in trace.instances):
        raise Invalid("no trace row is created in the live window")
    at = (trace.end // 3600 + 1) * 3600
    copied = live_rows(trace, (start, end), at, keep_services=True)
    return copied, trace.epoch + timedelta(seconds=at)


def _history(trace: Trace, open_until: int | None) -> Trace | None:
    """The rows created before ``open_until`` (None: no history, a plain replay)."""
    if open_until is None:
        return None
    return replace(trace, instances=tuple(i for i in trace.instances if i.created < open_until))


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_replay(
    trace: str | Path | Trace = "openb",
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
    window: tuple[datetime, datetime] | None = None,
    policy: str | None = None,
    scale: Decimal | None = None,
    run: str | None = None,
    until: datetime | None = None,
    budgets: Path | None = None,
    live_from: datetime | None = None,
    live: tuple[datetime, datetime] | None = None,
    at_live: Callable[[PostgresEventStore], None] | None = None,
) -> ReplaySummary:
    """Replay ``trace`` end to end (:mod:`dlc_ledger.wiring.replay`). Raises on a stalled
    pipeline. ``until`` stops a closed loop at that instant, jobs left running and queued.
    ``trace`` may be a loaded :class:`~kubesim.traces.Trace` (e.g. one with a live period
    appended by :func:`kubesim.traces.live_rows`; ``fmt``, ``nodes``, ``epoch``, ``limit``
    and ``window`` then do not apply). ``live_from`` (with ``closed_loop``): the rows
    created before it are history, played open loop with no dispatcher cycle and checked
    against the trace to that instant; the rows created from it on are the closed loop's
    (:func:`~.closed_loop.run_closed_loop`'s ``open_until``), in the same database.
    ``live`` (with ``closed_loop``, without ``live_from``): a window of cluster time whose
    rows are copied (:func:`kubesim.traces.live_rows`, suffix ``-live``, a service's rows
    kept a service's) to the first full hour after the trace's end and played live from
    there, the whole trace before them as history. ``at_live``: called with the store once
    the history is played, before the first cycle (what an operator changes as the live
    part begins: a quota added).
    ``policy`` / ``scale`` reshape the quota tree (:mod:`ledger.quotas.what_if`);
    ``run`` (without ``store``): into that run's database (:mod:`dlc_ledger.wiring.runs`),
    created when missing and emptied first: a run holds one replay."""
    from dlc_ledger.wiring import context

    say = progress or (lambda _line: None)
    started_wall = time.monotonic()
    if isinstance(trace, Trace):
        if limit or window or nodes or epoch:
            raise Invalid("a loaded trace is replayed as it is: no limit, window, nodes or epoch")
        loaded = trace
    else:
        loaded = load_replay_trace(trace, fmt, nodes=nodes, epoch=epoch, limit=limit, window=window)
    if (live_from is not None or live is not None) and not closed_loop:
        raise Invalid("a live part (--live) is played closed loop: add --closed-loop")
    if live is not None:
        if live_from is not None:
            raise Invalid("a live window (--live) starts its own live part: no live_from")
        loaded, live_from = _with_live_copy(loaded, live)
    open_until = None
    if live_from is not None:
        open_until = round((live_from - loaded.epoch).total_seconds())
        if open_until < 0:
            raise Invalid("the live part must start at or after the trace's epoch")
    history = _history(loaded, open_until)
    if closed_loop and quotas is None:
        raise Invalid("--closed-loop needs --quotas: the dispatcher decides against a tree")
    if until is not None and not closed_loop:
        raise Invalid("--until stops a closed-loop replay: add --closed-loop")
    if (policy or scale) and quotas is None:
        raise Invalid("--policy and --scale-quotas reshape --quotas: name a quota tree")
    own_store = store is None
    own_run = run is not None and run != OPEN_LOOP and store is None
    if fresh and context.settings().database_url and store is None and not yes and not own_run:
        raise Invalid(
            "--fresh drops every table of the database at DATABASE_URL; add --yes to confirm"
        )
    if store is None and own_run:
        assert run is not None
        base = context.base_database_url(create=True)
        store = PostgresEventStore(create_run_database(base, run))
        fresh = True
    elif store is None:  # a dev tool: it may bring a configured database's schema up to date
        if run == OPEN_LOOP:
            store = PostgresEventStore(context.base_database_url(create=True))
        else:
            store = context.open_store(create=True, check=False, role="owner")  # may reset
    if own_store:
        upgrade_if_behind(store)
    try:
        if fresh:
            reset_database(store)
            say("fresh: dropped and recreated the database schema")
        bootstrap = bootstrap or context.kafka_bootstrap()
        partitions = partitions or context.settings().partitions
        topic = replay_topic(store, bootstrap, partitions)
        tree = None if quotas is None else reshaped_tree(quotas, policy, scale)
        apply_reference_data(store, tree, pricebook, loaded.epoch, say, subscriptions, budgets)
        summary = ReplaySummary.expected(
            loaded if history is None else history, cluster_name(loaded), topic
        )
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
                until=None if until is None else (until - loaded.epoch).total_seconds(),
                bill_every=3600.0 if budgets is not None else None,
                open_until=open_until,
                at_live=None if at_live is None else lambda: at_live(store),
            )
            summary.published, summary.ingested = loop.published, loop.ingested
            summary.virtual_seconds = loop.virtual_seconds
            if loop.stopped_at is not None:  # jobs left running: the trace's counts do not apply
                summary.stopped = True
                summary.notes.append(f"stopped at {until:%Y-%m-%dT%H:%MZ} as asked (--until)")
        else:
            played = run_pipeline(loaded, site, speed, say, progress_interval, timeout)
            summary.published = played.published
            summary.ingested = played.ingested
            summary.virtual_seconds = played.virtual_seconds
        check_store(summary, store, before)
        if not closed_loop:  # a closed loop's dispatcher decides when rows run: not the trace
            check_usage(summary, store, loaded)
        elif history is not None:  # the history is the trace's, to the live instant
            assert live_from is not None
            check_usage(summary, store, history, until=open_until)
            summary.notes.append(
                f"history: {len(history.instances):,} rows played open loop, checked against"
                f" the trace to {live_from:%Y-%m-%dT%H:%M:%SZ}; live from then:"
                f" {len(loaded.instances) - len(history.instances):,} rows closed loop"
            )
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
            summary.closed_loop = closed_loop_figures(store, loop, since=live_from)
        summary.wall_seconds = time.monotonic() - started_wall
        if run is not None and own_store:
            record = describe_run(
                run, loaded, closed_loop, policy, scale, cycle, until, live_from=live_from
            )
            base = context.base_database_url(announce=False)
            Runs(context.settings().data_dir, base).save(record, make_default=closed_loop)
        return summary
    finally:
        if own_store:
            store.close()
