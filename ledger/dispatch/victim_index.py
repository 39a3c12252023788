"""The admitted (non-idle) jobs of each quota, indexed for the victim search: their
resources summed per priority (what a preemption policy could ever allow there, in
O(distinct priorities)), the largest job seen per key, and the jobs in Kueue's candidate
order (priority, most recently admitted first, name), so the classical search can bound
what it could free before collecting anything and then take candidates lazily.

Kept in step by :class:`~ledger.dispatch.preemption.Decider` on every admit and evict;
the ordered lists are built on a quota's first search and then maintained.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator, Mapping

from ledger.dispatch.model import Admitted
from ledger.dispatch.workloads import unit_order

__all__ = ["Entry", "QuotaJobs", "VictimIndex", "candidate_order"]

#: one job in a quota's ordered list, behind its candidate-order key
Entry = tuple[tuple[int, float, tuple[str, int]], Admitted]


def candidate_order(wl: Admitted) -> tuple[int, float, tuple[str, int]]:
    """Kueue's ``CandidatesOrdering`` within one quota (lower priority first, most recently
    admitted first, then by name): :func:`~ledger.dispatch.candidates.order_key` without
    its first element, which is the same for every job of a quota."""
    return (wl.priority, -wl.admitted_at.timestamp(), unit_order(wl.job))


class QuotaJobs:
    """One quota's jobs by name; summed per priority and ordered once first asked for
    (building them for every quota would be a pass over the whole admitted set per cycle),
    then kept in step."""

    __slots__ = ("_by_priority", "_cache", "_count", "_largest", "_ordered", "by_name")

    def __init__(self, by_name: dict[str, Admitted] | None = None) -> None:
        self.by_name: dict[str, Admitted] = {} if by_name is None else by_name
        #: per priority: the jobs' resources summed per key (None: not built yet)
        self._by_priority: dict[int, dict[str, float]] | None = None
        self._count: dict[int, int] = {}
        #: per key, the largest amount any job of the quota has had since the sums were
        #: built: it only grows, so it stays an upper bound of every job still here
        self._largest: dict[str, float] = {}
        self._ordered: list[Entry] | None = None
        #: answers of :meth:`summed` and :meth:`allowed_end` since the last change
        self._cache: dict[tuple[bool, str, int], object] = {}

    def add(self, wl: Admitted) -> None:
        if self._cache:
            self._cache.clear()
        self.by_name[wl.job] = wl
        if self._by_priority is not None:
            self._sum_in(self._by_priority, wl)
        if self._ordered is not None:
            insort(self._ordered, (candidate_order(wl), wl))

    def _sum_in(self, by_priority: dict[int, dict[str, float]], wl: Admitted) -> None:
        sums = by_priority.setdefault(wl.priority, {})
        self._count[wl.priority] = self._count.get(wl.priority, 0) + 1
        for k, v in wl.resources.items():
            sums[k] = sums.get(k, 0) + v
            if v > self._largest.get(k, 0):
                self._largest[k] = v

    def remove(self, wl: Admitted) -> None:
        if self._cache:
            self._cache.clear()
        del self.by_name[wl.job]
        by_priority = self._by_priority
        if by_priority is not None:
            left = self._count[wl.priority] - 1
            if left == 0:
                # exact zero again, not the float residue of adding and subtracting
                del self._count[wl.priority]
                del by_priority[wl.priority]
            else:
                self._count[wl.priority] = left
                sums = by_priority[wl.priority]
                for k, v in wl.resources.items():
                    sums[k] = sums.get(k, 0) - v
        if self._ordered is not None:
            key = candidate_order(wl)
            i = bisect_left(self._ordered, (key,))
            assert self._ordered[i][0] == key
            del self._ordered[i]

    def _sums(self) -> dict[int, dict[str, float]]:
        if self._by_priority is None:
            by_priority: dict[int, dict[str, float]] = {}
            for wl in self.by_name.values():
                self._sum_in(by_priority, wl)
            self._by_priority = by_priority
        return self._by_priority

    def largest(self, key: str) -> float:
        """At least the largest amount of ``key`` any job here requests."""
        self._sums()
        return self._largest.get(key, 0)

    def ordered(self) -> list[Entry]:
        """The jobs in Kueue's candidate order, each behind its key (keys are unique: they
        end with the job's name), not to be changed."""
        if self._ordered is None:
            self._ordered = sorted((candidate_order(wl), wl) for wl in self.by_name.values())
        return self._ordered

    def allowed_end(self, allows: str, priority: int) -> int:
        """How many of :meth:`ordered` (a prefix: lower priority first) have a priority a
        preemption policy ``allows`` could accept from an incoming of ``priority``."""
        cached = self._cache.get((False, allows, priority))
        if isinstance(cached, int):
            return cached
        end = self._allowed_end(allows, priority)
        self._cache[(False, allows, priority)] = end
        return end

    def _allowed_end(self, allows: str, priority: int) -> int:
        ordered = self.ordered()
        if allows == "Never":
            return 0
        if allows == "Any":
            return len(ordered)
        if allows == "LowerOrNewerEqualPriority":
            return bisect_left(ordered, priority + 1, key=lambda e: e[0][0])
        return bisect_left(ordered, priority, key=lambda e: e[0][0])

    def summed(self, allows: str, priority: int) -> dict[str, float]:
        """Per key, the resources of every job a preemption ``policy`` with an incoming of
        ``priority`` could allow (``LowerOrNewerEqualPriority`` counts all of the equal
        priority: an upper bound; not to be changed)."""
        cached = self._cache.get((True, allows, priority))
        if isinstance(cached, dict):
            return cached
        out: dict[str, float] = {}
        self._cache[(True, allows, priority)] = out
        if allows == "Never":
            return out
        for p, sums in self._sums().items():
            if (
                allows == "Any"
                or p < priority
                or (allows == "LowerOrNewerEqualPriority" and p == priority)
            ):
                for k, v in sums.items():
                    out[k] = out.get(k, 0) + v
        return out


class VictimIndex(Mapping[str, Mapping[str, Admitted]]):
    """Admitted non-idle jobs by quota; as a mapping, quota → jobs by name (``ByQuota``)."""

    def __init__(self, jobs: Mapping[str, dict[str, Admitted]] | None = None) -> None:
        """``jobs``: quota → jobs by name (the dicts are taken over, not copied)."""
        self.quotas: dict[str, QuotaJobs] = {}
        for quota, by_name in (jobs or {}).items():
            self.quotas[quota] = QuotaJobs(by_name)

    def add(self, wl: Admitted) -> None:
        jobs = self.quotas.get(wl.quota)
        if jobs is None:
            jobs = self.quotas[wl.quota] = QuotaJobs()
        jobs.add(wl)

    def remove(self, wl: Admitted) -> None:
        self.quotas[wl.quota].remove(wl)

    def __getitem__(self, quota: str) -> Mapping[str, Admitted]:
        return self.quotas[quota].by_name

    def __iter__(self) -> Iterator[str]:
        return iter(self.quotas)

    def __len__(self) -> int:
        return len(self.quotas)
