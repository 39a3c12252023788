"""Which running jobs have run past their declared maximum, pure.

A job may declare its maximum run time (the platform's job timeout; annotation
``dlc.ledger/max-run-seconds``). The live dispatcher enforces it: each cycle, a job that has
been running (since the start of its current run: a preempted job's clock restarts when it
is admitted again) at least its maximum is stopped for good, with the decision's reason
:data:`MAX_RUN_REASON`, as a budget stop is carried out through the same actuator. The start
estimates use the same bound (:mod:`ledger.dispatch.runtimes`: no job runs longer).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from ledger.dispatch.model import Admitted

__all__ = ["MAX_RUN_REASON", "Overrun", "overruns"]

#: the reason of a stop decision at a job's maximum run time
MAX_RUN_REASON = "MaxRunTimeExceeded"


@dataclass(frozen=True)
class Overrun:
    """A running job that has run at least its declared maximum."""

    job: str
    quota: str
    #: seconds it has run in its current run, and its maximum
    ran_seconds: float
    max_seconds: int


def overruns(
    running: Iterable[Admitted], limits: Mapping[str, int], now: datetime
) -> tuple[Overrun, ...]:
    """The jobs of ``running`` (admitted at the start of their current run) that have run
    at least their maximum (``limits``: seconds by job) at ``now``, by job."""
    out = [
        Overrun(wl.job, wl.quota, ran, limits[wl.job])
        for wl in running
        if wl.job in limits and (ran := (now - wl.admitted_at).total_seconds()) >= limits[wl.job]
    ]
    return tuple(sorted(out, key=lambda o: o.job))
