"""Quota usage rows derived from raw per-leaf usage, kept current as the leaves change.

The quota projection stores only order-independent facts: per leaf quota and flavor,
signed changes of raw usage stamped with cluster time. Every figure a reader sees
(aggregates up the tree, borrowed, lent, over-admission, job counts) is derived from
those here, at read time: once for an instant, or change by change for a window's
history. Pure: no IO.

Raw usage per (quota, flavor) is five integers, :data:`RAW`: used (idle-mode part
included), the idle-mode part, queued demand, running jobs, queued jobs. A row is
nine, :data:`NUMBERS`. Usage on a quota that is not a leaf of the tree (deleted, never
created, or an inner node) is reported under :data:`~ledger.quotas.NO_QUOTA` with
min = max = 0, never borrowed or lent.

Raw usage is kept under the flavor it was recorded with; the rows count it under the
flavor the tree in force accounts it to (:func:`~ledger.quotas.counted_flavor`:
``gpu/<model>`` against the leaf's ``gpu/<model>`` entry if it names one, else its
``gpu/any``), so a tree change re-counts it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ledger.events import QuotaSpec
from ledger.quotas import NO_QUOTA, FlavorUsage, UsageCalculator, counted_flavor

__all__ = ["NUMBERS", "RAW", "Key", "Numbers", "UsageBoard"]

RAW = ("used", "idle_used", "queued", "running_jobs", "queued_jobs")
NUMBERS = (
    "min",
    "max",
    "used",
    "borrowed",
    "lent",
    "queued",
    "running_jobs",
    "queued_jobs",
    "over_admitted",
)

Key = tuple[str, str]  # (quota, flavor)
Numbers = tuple[int, ...]  # in NUMBERS order

_USED, _IDLE, _QUEUED, _RUNNING, _QJOBS = range(5)


class UsageBoard:
    """Raw usage per leaf and the rows it implies, for one tree at a time.

    :meth:`add` raw changes and :meth:`set_tree` tree changes, then :meth:`settle`:
    it returns the rows that changed since the last call (``None`` for a row that
    went away). A leaf's change recomputes only its path to the root and the lending
    among the path's children (:class:`~ledger.quotas.FlavorUsage`); a tree change
    recomputes every row (and re-counts the raw usage's flavors). The rows exist for
    every node x flavor named by the tree or counted for any raw usage, and under ``-``
    while orphaned usage is non-zero.
    """

    def __init__(self, specs: Mapping[str, QuotaSpec]) -> None:
        self.own: dict[str, dict[str, list[int]]] = {}  # recorded flavor -> quota -> RAW
        # counted flavor -> quota -> RAW: ``own`` as the tree in force counts it (rebuilt
        # from ``own`` when the tree changes)
        self.counted: dict[str, dict[str, list[int]]] = {}
        self.rows: dict[Key, Numbers] = {}
        self._dirty: dict[str, set[str]] = {}  # counted flavor -> quotas changed
        self.set_tree(specs)

    def set_tree(self, specs: Mapping[str, QuotaSpec]) -> None:
        self.specs = dict(specs)
        self._calc = UsageCalculator(self.specs)
        self._usage: dict[str, FlavorUsage] = {}
        self._counts_as: dict[Key, str] = {}  # (quota, recorded flavor) -> counted flavor
        self._whole = True

    def counts_as(self, quota: str, flavor: str) -> str:
        """The flavor usage of ``flavor`` on ``quota`` counts as under the tree in force
        (usage on a quota that is not a leaf counts under ``-``, with no spec)."""
        key = (quota, flavor)
        found = self._counts_as.get(key)
        if found is None:
            spec = self.specs[quota] if quota in self._calc.leaves else None
            found = self._counts_as[key] = counted_flavor(spec, flavor)
        return found

    def add(self, quota: str, flavor: str, raw: Sequence[int]) -> None:
        _add_raw(self.own, flavor, quota, raw)
        if self._whole:  # ``counted`` is rebuilt from ``own`` at the next settle
            return
        counted = self.counts_as(quota, flavor)
        _add_raw(self.counted, counted, quota, raw)
        touched = self._dirty.get(counted)
        if touched is None:
            touched = self._dirty[counted] = set()
        touched.add(quota)

    def settle(self) -> dict[Key, Numbers | None]:
        """The rows changed since the last call (``None``: the row went away)."""
        changes: dict[Key, Numbers | None] = {}
        if self._whole:
            self.counted = {}
            for flavor, per in self.own.items():
                for quota, raw in per.items():
                    _add_raw(self.counted, self.counts_as(quota, flavor), quota, raw)
            universe: set[str] = set(self.counted)
            for spec in self.specs.values():
                universe.update(spec.min, spec.max, spec.lend_limit)
            fresh = _all_rows(self._calc, self.counted, universe)
            for key, numbers in fresh.items():
                self._set(key, numbers, changes)
            for key in [k for k in self.rows if k not in fresh]:
                self._set(key, None, changes)
            self._usage = {}  # rebuilt from ``counted`` on a flavor's next change
            self._whole = False
        else:
            for flavor, quotas in self._dirty.items():
                self._settle(flavor, quotas, changes)
        self._dirty.clear()
        return changes

    def _set(self, key: Key, numbers: Numbers | None, changes: dict[Key, Numbers | None]) -> None:
        if self.rows.get(key) == numbers:
            return
        if numbers is None:
            del self.rows[key]
        else:
            self.rows[key] = numbers
        changes[key] = numbers

    def _settle(self, flavor: str, quotas: set[str], changes: dict[Key, Numbers | None]) -> None:
        calc = self._calc
        own, index = self.counted[flavor], calc.index
        usage = self._usage.get(flavor)
        if usage is None:  # the flavor's first change since the tree was set: every node
            usage = self._usage[flavor] = FlavorUsage(calc, flavor)
            for quota, v in own.items():
                if quota in calc.leaves:
                    usage.set_leaf(index[quota], *v)
            usage.settle()
            nodes: Iterable[int] = range(len(calc.order))
            orphans = True
        else:
            orphans = False
            for quota in quotas:
                if quota in calc.leaves:
                    usage.set_leaf(index[quota], *own[quota])
                else:
                    orphans = True
            nodes = usage.settle()
        order = calc.order
        for i in nodes:
            self._set((order[i], flavor), usage.row(i), changes)
        if orphans:
            orphan = _orphan_row(calc, own)
            key = (NO_QUOTA, flavor)
            if orphan is not None:
                self._set(key, orphan, changes)
            elif key in self.rows:
                self._set(key, None, changes)


def _add_raw(
    table: dict[str, dict[str, list[int]]], flavor: str, quota: str, raw: Sequence[int]
) -> None:
    per = table.get(flavor)
    if per is None:
        per = table[flavor] = {}
    values = per.get(quota)
    if values is None:
        values = per[quota] = [0, 0, 0, 0, 0]
    for i, delta in enumerate(raw):
        values[i] += delta


def _orphan_row(calc: UsageCalculator, own: Mapping[str, Sequence[int]]) -> Numbers | None:
    used = queued = running = queued_jobs = 0
    for quota, v in own.items():
        if quota not in calc.leaves:
            used += v[_USED]
            queued += v[_QUEUED]
            running += v[_RUNNING]
            queued_jobs += v[_QJOBS]
    if not (used or queued or running or queued_jobs):
        return None
    return (0, 0, used, 0, 0, queued, running, queued_jobs, 0)


def _all_rows(
    calc: UsageCalculator,
    own: Mapping[str, Mapping[str, Sequence[int]]],
    flavors: Iterable[str],
) -> dict[Key, Numbers]:
    """Every node's row for ``flavors`` (after a tree change), plus ``-`` rows."""
    order, parent, index, leaves = calc.order, calc.parent, calc.index, calc.leaves
    out: dict[Key, Numbers] = {}
    empty: dict[str, Sequence[int]] = {}
    for flavor in flavors:
        per = own.get(flavor, empty)
        used: dict[str, int] = {}
        idle: dict[str, int] = {}
        counts = [[0, 0, 0] for _ in order]  # queued, running_jobs, queued_jobs
        for quota, v in per.items():
            if quota in leaves:
                if v[_USED]:
                    used[quota] = v[_USED]
                if v[_IDLE]:
                    idle[quota] = v[_IDLE]
                c = counts[index[quota]]
                c[0] += v[_QUEUED]
                c[1] += v[_RUNNING]
                c[2] += v[_QJOBS]
        for i in range(len(order) - 1, 0, -1):  # children before parents: sum upwards
            p = parent[i]
            if p is not None:
                c, up = counts[i], counts[p]
                up[0] += c[0]
                up[1] += c[1]
                up[2] += c[2]
        for i, (lo, hi, u, b, lent, over) in enumerate(calc.numbers(flavor, used, idle)):
            c = counts[i]
            out[(order[i], flavor)] = (lo, hi, u, b, lent, c[0], c[1], c[2], over)
        orphan = _orphan_row(calc, per)
        if orphan is not None:
            out[(NO_QUOTA, flavor)] = orphan
    return out
