"""Projector lanes: independent projections caught up in parallel processes.

Folding a page is Python-bound, so threads gain nothing (the GIL; measured in
``bench/RESULTS.md``), but projections share no state: each owns its tables and its
checkpoint row. A lane is a group of projections driven by one
:class:`~consumers.projector.Projector` in its own process, with its own connection;
the groups are disjoint, and the checkpoint row locks every step takes would
serialise two runners that did overlap, so exactly-once holds as with one process.
Within a lane, pages are still read once for all its projections.

Lanes are balanced by each projection's :attr:`~projections.base.Projection.cost`
(its relative cost of applying an event): heaviest first into the lightest lane. A lane's process
finds its projections by name in the registry, so only registered ones can run in lanes, and
opens its store with the caller's :data:`StoreOpener` (the composition root chooses the adapter).
"""

from __future__ import annotations

import multiprocessing
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection as Pipe
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess

from consumers.projector import Projector, StopFlag
from ledger.errors import Invalid
from ledger.store.base import EventStore
from projections.base import Projection
from projections.registry import projection_named

__all__ = ["LaneFailed", "StoreOpener", "catch_up_lanes", "follow_lanes", "plan_lanes"]

#: Opens the store in a lane's process. It crosses to a fresh interpreter, so it must
#: pickle: a module-level function, or a ``functools.partial`` of one with plain values.
StoreOpener = Callable[[], EventStore]


class LaneFailed(RuntimeError):
    """A lane's process ended with an error; its checkpoints stand at its last commit."""


def plan_lanes(projections: Sequence[Projection], workers: int) -> list[list[Projection]]:
    """At most ``workers`` non-empty groups of ``projections`` with balanced total cost."""
    if workers < 1:
        raise Invalid(f"workers must be at least 1, got {workers}")
    lanes: list[list[Projection]] = [[] for _ in range(min(workers, len(projections)))]
    loads = [0.0] * len(lanes)
    for projection in sorted(projections, key=lambda p: (-p.cost, p.name)):
        lightest = loads.index(min(loads))
        lanes[lightest].append(projection)
        loads[lightest] += projection.cost
    return [lane for lane in lanes if lane]


@dataclass(frozen=True)
class _Lane:
    """What a lane's process needs: plain values, since it starts from a fresh interpreter."""

    open_store: StoreOpener
    names: tuple[str, ...]
    page_size: int
    poll_interval: float | None  # None: catch up once; else follow until stopped


def _run_lane(lane: _Lane, stop: StopFlag, results: Pipe) -> None:
    # the parent owns Ctrl-C: it sets ``stop`` and the lane ends after its step
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    store: EventStore | None = None
    try:
        store = lane.open_store()
        projector = Projector(
            store, [projection_named(n) for n in lane.names], page_size=lane.page_size
        )
        if lane.poll_interval is None:
            results.send(projector.catch_up(stop=stop))
        else:
            projector.run_forever(stop, poll_interval=lane.poll_interval)
            results.send(0)
    except BaseException as exc:
        # as text: not every driver exception survives pickling
        results.send(f"{type(exc).__name__}: {exc}")
        raise
    finally:
        results.close()
        if store is not None:
            store.close()


def _run(lanes: Sequence[_Lane], stop: StopFlag, *, follow: bool) -> int:
    # spawn, not fork: a forked child would inherit the parent's pooled connections
    ctx = multiprocessing.get_context("spawn")
    shared = ctx.Event()  # the parent's ``stop``, seen by every lane
    pending: dict[Pipe, tuple[_Lane, BaseProcess]] = {}
    for lane in lanes:
        receiver, sender = ctx.Pipe(duplex=False)
        process = ctx.Process(
            target=_run_lane, args=(lane, shared, sender), name=f"lane:{','.join(lane.names)}"
        )
        process.start()
        sender.close()
        pending[receiver] = (lane, process)
    total = 0
    failures: list[str] = []
    try:
        while pending:
            if stop.is_set() or (failures and follow):
                shared.set()  # one lane failed while following: stop the others too
            ready = wait(list(pending), timeout=0.2)
            for pipe in [p for p in pending if p in ready]:
                done, child = pending.pop(pipe)
                try:
                    outcome: object = pipe.recv()
                except EOFError:  # died without a word (killed, or the interpreter crashed)
                    outcome = "no result"
                child.join()
                if isinstance(outcome, int) and child.exitcode == 0:
                    total += outcome
                else:
                    failures.append(
                        f"lane {', '.join(done.names)} (exit code {child.exitcode}): {outcome}"
                    )
    finally:
        # interrupted: a lane killed mid-step rolls its transaction back, losing nothing
        for _, left in pending.values():
            left.terminate()
            left.join()
    if failures:
        raise LaneFailed("; ".join(failures))
    return total


def _lanes(
    open_store: StoreOpener,
    projections: Sequence[Projection],
    workers: int,
    page_size: int,
    poll_interval: float | None,
) -> list[_Lane]:
    return [
        _Lane(open_store, tuple(p.name for p in group), page_size, poll_interval)
        for group in plan_lanes(projections, workers)
    ]


def catch_up_lanes(
    open_store: StoreOpener,
    projections: Sequence[Projection],
    *,
    workers: int,
    page_size: int,
    stop: StopFlag | None = None,
) -> int:
    """Catch ``projections`` up to the head in up to ``workers`` processes (or until
    ``stop`` is set); returns positions covered, summed over the lanes."""
    lanes = _lanes(open_store, projections, workers, page_size, None)
    return _run(lanes, stop or threading.Event(), follow=False)


def follow_lanes(
    open_store: StoreOpener,
    projections: Sequence[Projection],
    stop: StopFlag,
    *,
    workers: int,
    page_size: int,
    poll_interval: float,
) -> None:
    """Tail the store in up to ``workers`` processes until ``stop`` is set.

    ``stop`` is the caller's (a signal handler sets it); each lane ends after its
    current step.
    """
    _run(_lanes(open_store, projections, workers, page_size, poll_interval), stop, follow=True)
