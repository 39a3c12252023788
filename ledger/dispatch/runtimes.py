"""How long will a job run? The run times of comparable finished jobs, pure.

A start estimate needs, for every job ahead, how long it runs. Nothing says so in advance
(a job may only declare a maximum, its timeout), so the answer is a distribution: the run
times (seconds in Running) of the finished jobs that are *comparable* to it, from the
narrowest class with enough of them to the widest (:data:`LADDER`):

1. same quota and similar GPU request (:func:`gpu_class`: powers of two of whole GPUs);
2. same quota;
3. same workspace and similar GPU request;
4. same workspace;
5. any quota, similar GPU request;
6. every finished job.

A class is enough with at least ``min_jobs`` finished jobs (:data:`MIN_COMPARABLE`); with
none enough, a job not yet running takes the class with the most (a few jobs are better
than none).

For a running job the distribution is *conditional on its age*: only the jobs that ran
longer than it has so far (run times are heavy-tailed: a job past the median is likely a
long one). When fewer than ``min_jobs`` of a class did (a lone long job would make its end
"certain"), it gets a Pareto tail (:attr:`RunTime.tail_from`): the chance it runs past
``x`` is ``a / x`` from ``a``, its age (the "Lindy" prior of a heavy tail: the median is "as
long again", the 90th percentile ten times its age), or the median run time of all
finished jobs if that is longer (a young job is not expected to end sooner than a typical
one).

A declared maximum (:attr:`RunTime.cap`) bounds every run time: the dispatcher stops a job
at its maximum (``MaxRunTimeExceeded``), so no job runs longer. A job with a maximum and no
comparable job runs to its maximum (the cautious answer).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ledger.errors import Invalid

__all__ = [
    "LADDER",
    "LONGEST_RUN",
    "MIN_COMPARABLE",
    "FinishedRun",
    "RunTime",
    "RunTimeBook",
    "Scope",
    "gpu_class",
    "gpu_request",
    "percentile",
]

#: finished jobs a class needs before it is used (else a wider one)
MIN_COMPARABLE = 5
#: no run time is taken longer (the tail's far end; instants stay far from datetime's max)
LONGEST_RUN = 10 * 366 * 86_400.0

Scope = Literal["quota", "workspace", "all"]
#: the classes tried, narrow to wide: (scope, whether the GPU class must match)
LADDER: tuple[tuple[Scope, bool], ...] = (
    ("quota", True),
    ("quota", False),
    ("workspace", True),
    ("workspace", False),
    ("all", True),
    ("all", False),
)


def gpu_class(mgpu: float) -> int:
    """Similar GPU requests: 0 for none, then 1 for up to one GPU, 2 for two, 3 for three
    or four, 4 for five to eight, ... (powers of two of whole GPUs; mGPU in)."""
    if mgpu <= 0:
        return 0
    return 1 + max(0, math.ceil(math.log2(math.ceil(mgpu / 1000))))


def gpu_request(resources: Mapping[str, float]) -> float:
    """A workload's GPU request in mGPU: its ``gpu*`` keys summed (the tree's flavors)."""
    return sum(v for k, v in resources.items() if k.startswith("gpu"))


def percentile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (PostgreSQL's ``percentile_cont``) of
    an ascending, non-empty sequence."""
    if not ordered:
        raise Invalid("no values to take a percentile of")
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class FinishedRun:
    """One finished (Succeeded or Failed) job: whose it was, what it asked, how long it ran."""

    quota: str | None
    workspace: str | None
    mgpu: float
    seconds: float


@dataclass(frozen=True)
class RunTime:
    """What a job's whole run time (seconds, from its start) may be: the comparable finished
    jobs' run times, or a Pareto tail (see :meth:`RunTimeBook.of`)."""

    #: the comparable finished jobs' run times, ascending (for a running job, those longer
    #: than it has run); empty on the tail or with only a ``cap``
    samples: tuple[float, ...]
    scope: Scope | None = None
    #: the quota or workspace of the class ("" for all; None without a class)
    name: str = ""
    #: the GPU class matched (:func:`gpu_class`), None when any
    gpus: int | None = None
    #: seconds it has run so far (0 for a pending job)
    ran: float = 0.0
    #: on the tail: ``P(run > x) = tail_from / x`` beyond it (None: the samples)
    tail_from: float | None = None
    #: its declared maximum run time, if any
    cap: float | None = None

    def __post_init__(self) -> None:
        if self.tail_from is not None and (self.tail_from <= 0 or self.samples):
            raise Invalid("a tail starts after 0 s and replaces the samples")
        if not self.samples and self.tail_from is None and self.cap is None:
            raise Invalid("a run time needs samples, a tail or a maximum")

    @property
    def jobs(self) -> int:
        """How many finished jobs it rests on."""
        return len(self.samples)

    @property
    def tail(self) -> bool:
        """Whether it is the Pareto tail (too few comparable jobs ran as long)."""
        return self.tail_from is not None

    def _capped(self, seconds: float) -> float:
        return min(seconds, LONGEST_RUN if self.cap is None else self.cap)

    def quantile(self, q: float) -> float:
        """The ``q``-quantile of the whole run time (the samples: interpolated between
        them, as ``percentile_cont``)."""
        if not 0 <= q < 1:
            raise Invalid(f"a run-time quantile is in [0, 1): {q}")
        if self.samples:
            return self._capped(percentile(self.samples, q))
        if self.tail_from is not None:
            return self._capped(self.tail_from / (1 - q))
        assert self.cap is not None  # __post_init__
        return self.cap

    @property
    def median(self) -> float:
        return self.quantile(0.5)

    def draw(self, u: float) -> float:
        """The run time at ``u`` in [0, 1) of its distribution: one of the samples, each
        equally likely; on the tail, its quantile."""
        if not 0 <= u < 1:
            raise Invalid(f"a draw is in [0, 1): {u}")
        if self.samples:
            return self._capped(self.samples[int(u * len(self.samples))])
        return self.quantile(u)


@dataclass(frozen=True)
class RunTimeBook:
    """The finished jobs' run times by class; :meth:`of` picks a job's comparable ones."""

    #: (scope, name, GPU class or None) -> run times ascending
    classes: Mapping[tuple[Scope, str, int | None], tuple[float, ...]] = field(default_factory=dict)
    min_jobs: int = MIN_COMPARABLE

    @staticmethod
    def of_runs(runs: Iterable[FinishedRun], *, min_jobs: int = MIN_COMPARABLE) -> RunTimeBook:
        if min_jobs < 1:
            raise Invalid("a class needs at least one job")
        grouped: dict[tuple[Scope, str, int | None], list[float]] = {}
        for run in runs:
            if run.seconds <= 0:
                continue
            g = gpu_class(run.mgpu)
            keys: list[tuple[Scope, str, int | None]] = [("all", "", g), ("all", "", None)]
            if run.quota:
                keys += [("quota", run.quota, g), ("quota", run.quota, None)]
            if run.workspace:
                keys += [("workspace", run.workspace, g), ("workspace", run.workspace, None)]
            for key in keys:
                grouped.setdefault(key, []).append(run.seconds)
        return RunTimeBook({k: tuple(sorted(v)) for k, v in grouped.items()}, min_jobs)

    @property
    def empty(self) -> bool:
        return not self.classes.get(("all", "", None))

    def of(
        self,
        quota: str | None,
        workspace: str | None,
        mgpu: float,
        *,
        ran: float = 0.0,
        cap: float | None = None,
    ) -> RunTime | None:
        """The run time of a job of ``quota``, ``workspace`` asking ``mgpu`` that has run
        ``ran`` seconds so far, bounded by its maximum ``cap`` (see the module docstring);
        None when nothing is known (no finished job, no maximum)."""
        g = gpu_class(mgpu)
        names = {"quota": quota or "", "workspace": workspace or "", "all": ""}
        widest: RunTime | None = None
        for scope, by_gpu in LADDER:
            name = names[scope]
            if scope != "all" and not name:
                continue
            ordered = self.classes.get((scope, name, g if by_gpu else None), ())
            longer = tuple(ordered[bisect.bisect_right(ordered, ran) :]) if ran > 0 else ordered
            if not longer:
                continue
            found = RunTime(longer, scope, name, g if by_gpu else None, ran, cap=cap)
            if len(longer) >= self.min_jobs:
                return found
            if widest is None or found.jobs > widest.jobs:
                widest = found
        if ran > 0 and not self.empty:
            # too few comparable jobs ran longer to say how much longer: the heavy tail,
            # from the job's age, or from a typical job's run time for a young one
            anchor = max(ran, percentile(self.classes[("all", "", None)], 0.5))
            return RunTime((), None, "", None, ran, tail_from=anchor, cap=cap)
        if widest is not None:
            return widest
        if cap is not None:
            return RunTime((), None, "", None, ran, cap=cap)
        return None
