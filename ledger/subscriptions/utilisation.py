"""Are we using what we pay for? Subscribed GPU time split into used, lent and idle.

Hour by hour (UTC) and group by group:

- **subscribed**: the group's schedulable subscriptions' GPUs x the time;
- **used**: GPU time of the jobs of quotas that draw on the group (billing mode other
  than idle or spot), a quota drawing on several groups split by their capacity that
  hour; capped at subscribed (the rest is ``over``: used beyond what was bought);
- **lent**: GPU time of idle-mode jobs of quotas that do not draw on the group, spread
  over the groups' spare time (subscribed - used) in proportion to it, capped at it;
  what they paid for it is the idle GPU rate in force;
- **idle**: subscribed - used - lent.

Quantities are mGPU x seconds (exact integers except where an hour is split between
groups). The cost of a group in a window is what its subscriptions recognised in it
(:mod:`.recognition`) plus, for a cancellation in it, what was consumed beyond that.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from ledger.subscriptions.model import Subscription
from ledger.subscriptions.postings import recognition_transactions
from ledger.subscriptions.recognition import recognised_by

__all__ = ["GroupMonth", "OccupancySpan", "Utilisation", "subscription_cost", "utilisation"]

HOUR = timedelta(hours=1)
#: an amount: an int while whole, a Fraction once an hour is split
Number = int | Fraction


@dataclass(frozen=True)
class OccupancySpan:
    quota: str | None
    workspace: str | None
    billing_mode: str
    mgpu: int
    start: datetime
    end: datetime


@dataclass
class GroupMonth:
    """One group's GPU time in one month, in mGPU x seconds (``Fraction`` where split)."""

    subscribed: Fraction = Fraction(0)
    used: Fraction = Fraction(0)
    over: Fraction = Fraction(0)
    lent: Fraction = Fraction(0)
    lent_paid: Fraction = Fraction(0)  # currency units
    by_quota: dict[str, Fraction] = field(default_factory=lambda: defaultdict(Fraction))

    @property
    def idle(self) -> Fraction:
        return self.subscribed - self.used - self.lent


@dataclass
class Utilisation:
    #: (group, "YYYY-MM") -> figures
    months: dict[tuple[str, str], GroupMonth]


def _floor_hour(t: datetime) -> datetime:
    return t.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _hours(start: datetime, end: datetime) -> Iterable[tuple[datetime, float]]:
    h = _floor_hour(start)
    while h < end:
        lo, hi = max(h, start), min(h + HOUR, end)
        if hi > lo:
            yield h, (hi - lo).total_seconds()
        h += HOUR


def _month(t: datetime) -> str:
    return f"{t.year:04d}-{t.month:02d}"


class _Hourly:
    """Amounts (mGPU x seconds) per key and hour from constant rates over intervals, in
    time linear in the intervals plus the hours walked, never in their product: the
    whole hours inside an interval are one difference (its rate starts, its rate stops),
    only its two edge hours are added one by one. The seconds are those
    :func:`_hours` yields (a float, as every figure here was always weighed), so the sums
    are the very Fractions a per-hour loop adds up."""

    def __init__(self, origin: datetime) -> None:
        self.origin = origin
        #: hour index -> key -> (rate change, intervals change) at the hour's start
        self.steps: dict[int, dict[object, tuple[int, int]]] = defaultdict(dict)
        #: hour index -> key -> the edge hours' amounts
        self.edges: dict[int, dict[object, Fraction]] = defaultdict(dict)

    def _index(self, t: datetime) -> int:
        return (_floor_hour(t) - self.origin) // HOUR

    def _edge(self, key: object, rate: int, lo: datetime, hi: datetime) -> None:
        if hi > lo:
            row = self.edges[self._index(lo)]
            row[key] = row.get(key, Fraction(0)) + Fraction(rate) * Fraction(
                (hi - lo).total_seconds()
            )

    def _step(self, index: int, key: object, rate: int, count: int) -> None:
        row = self.steps[index]
        was_rate, was_count = row.get(key, (0, 0))
        row[key] = (was_rate + rate, was_count + count)

    def add(self, key: object, rate: int, lo: datetime, hi: datetime) -> None:
        """``rate`` mGPU over ``[lo, hi)``."""
        first, last = self._index(lo), self._index(hi)
        if first == last:
            self._edge(key, rate, lo, hi)
            return
        self._edge(key, rate, lo, self.origin + (first + 1) * HOUR)
        self._edge(key, rate, self.origin + last * HOUR, hi)
        if last > first + 1:
            self._step(first + 1, key, rate, 1)
            self._step(last, key, -rate, -1)

    def walk(self, end: datetime) -> Iterable[tuple[datetime, dict[object, Number]]]:
        """Each hour from the origin up to ``end`` holding an amount (zero included, as a
        zero-GPU subscription's hours are), with its amounts by key."""
        running: dict[object, tuple[int, int]] = {}
        full = int(HOUR.total_seconds())
        for index in range(self._index(end) + 1):
            for key, (rate, count) in self.steps.get(index, {}).items():
                was_rate, was_count = running.get(key, (0, 0))
                if was_count + count:
                    running[key] = (was_rate + rate, was_count + count)
                else:
                    running.pop(key, None)
            edges = self.edges.get(index)
            if not running and not edges:
                continue
            amounts: dict[object, Number] = {key: rate * full for key, (rate, _) in running.items()}
            for key, amount in (edges or {}).items():
                amounts[key] = amounts.get(key, 0) + amount
            yield self.origin + index * HOUR, amounts


_IDLE = ("idle",)  # the key of idle-mode use by quotas drawing on no group


def utilisation(
    subs: Iterable[Subscription],
    spans: Iterable[OccupancySpan],
    drawn: Mapping[str, tuple[str, ...]],
    start: datetime,
    end: datetime,
    idle_gpu_rate: Callable[[datetime], Decimal | None],
) -> Utilisation:
    """The figures of every group with subscriptions over ``[start, end)``.

    Only hours some subscription covers hold figures, so use outside them is never
    weighed: the work grows with the spans and subscriptions plus the hours the
    subscriptions cover in the window (at most the window's), not with each span's length.
    """
    lives = [
        (sub, max(sub.starts_at, start), min(sub.ends_at, end))
        for sub in subs
        if min(sub.ends_at, end) > max(sub.starts_at, start)
    ]
    if not lives:
        return Utilisation({})
    first = min(lo for _, lo, _ in lives)
    last = max(hi for _, _, hi in lives)
    capacity = _Hourly(_floor_hour(first))
    for sub, lo, hi in lives:
        if not sub.additions and len(set(sub.term_nodes)) <= 1:  # one count all along
            capacity.add(sub.group, sub.node.gpus * 1000 * sub.nodes, lo, hi)
            continue
        for span_lo, span_hi, nodes in sub.node_spans():  # the count changed: part by part
            a, b = max(span_lo, lo), min(span_hi, hi)
            if b > a:
                capacity.add(sub.group, sub.node.gpus * 1000 * nodes, a, b)
    use = _Hourly(_floor_hour(first))
    # use counts in the whole hours the subscriptions touch (and the window holds)
    weighed_from = max(start, _floor_hour(first))
    weighed_to = min(end, _floor_hour(last) + HOUR)
    for span in spans:
        groups = drawn.get(span.quota or "", ())
        lo, hi = max(span.start, weighed_from), min(span.end, weighed_to)
        if hi <= lo or span.mgpu <= 0:
            continue
        if span.billing_mode == "idle" and not groups:
            use.add(_IDLE, span.mgpu, lo, hi)
        elif groups and span.billing_mode not in ("idle", "spot"):
            use.add(span.quota, span.mgpu, lo, hi)
    used_at = dict(use.walk(weighed_to))
    # sums as plain ints while whole (a whole hour's amounts are): Fractions only where an
    # hour is split, so the hours walked cost integer additions, not rational ones
    sums: dict[tuple[str, str], list[Number]] = {}
    by_quota: dict[tuple[str, str], dict[str, Number]] = defaultdict(lambda: defaultdict(int))
    for h, have in capacity.walk(last):
        own: dict[str, Number] = defaultdict(int)
        own_q: dict[str, dict[str, Number]] = defaultdict(lambda: defaultdict(int))
        hour_use = used_at.get(h, {})
        for quota, amount in hour_use.items():
            if quota == _IDLE:
                continue
            assert isinstance(quota, str)
            groups = drawn[quota]
            if len(groups) == 1:  # the common case: all of it to the one group
                own[groups[0]] += amount
                own_q[groups[0]][quota] += amount
                continue
            total = sum(have.get(g, 0) for g in groups)
            for g in groups:
                share = Fraction(have.get(g, 0), total) if total else Fraction(1, len(groups))
                own[g] += amount * share
                own_q[g][quota] += amount * share
        month = _month(h)
        spare: dict[str, Number] = {}
        for key, sub_amount in have.items():
            assert isinstance(key, str)
            row = sums.setdefault((key, month), [0, 0, 0, 0, 0])
            used = own.get(key, 0)
            row[0] += sub_amount
            row[1] += min(used, sub_amount)
            row[2] += max(0, used - sub_amount)
            if key in own_q:
                mine = by_quota[(key, month)]
                for name, amount in own_q[key].items():
                    mine[name] += amount
            spare[key] = max(0, sub_amount - used)
        lendable = sum(spare.values())
        borrowed = min(hour_use.get(_IDLE, 0), lendable)
        if not borrowed:
            continue
        rate = idle_gpu_rate(h)
        for g, room in spare.items():
            if not room:
                continue
            lent = Fraction(borrowed * room, lendable)
            row = sums[(g, month)]
            row[3] += lent
            if rate is not None:
                row[4] += lent / 3_600_000 * Fraction(rate)
    months: dict[tuple[str, str], GroupMonth] = {}
    for group_month, (subscribed, used_sum, over, lent_sum, paid) in sums.items():
        quotas: dict[str, Fraction] = defaultdict(Fraction)
        quotas.update((q, Fraction(v)) for q, v in by_quota.get(group_month, {}).items())
        months[group_month] = GroupMonth(
            subscribed=Fraction(subscribed),
            used=Fraction(used_sum),
            over=Fraction(over),
            lent=Fraction(lent_sum),
            lent_paid=Fraction(paid),
            by_quota=quotas,
        )
    return Utilisation(months)


def subscription_cost(sub: Subscription, start: datetime, end: datetime) -> dict[str, int]:
    """What ``sub`` cost in each month of ``[start, end)``: the revenue it recognised
    there, and at a cancellation the consumed part not recognised by then (minor units)."""
    out: dict[str, int] = defaultdict(int)
    for at, txn in recognition_transactions(sub, end):
        if start < at <= end:
            out[_month(at - timedelta(microseconds=1))] += int(txn.postings[0].amount_minor)
    cancelled = sub.cancelled
    if cancelled is not None and cancelled.mode == "immediately":
        at = cancelled.effective_at
        if start <= at < end:
            deferred = sum(
                t.amount_minor - recognised_by(t, at) for t, _, _ in sub.parts() if t.ends_at > at
            )
            out[_month(at)] += deferred - cancelled.refund_minor
    return dict(out)
