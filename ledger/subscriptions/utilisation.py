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


def utilisation(
    subs: Iterable[Subscription],
    spans: Iterable[OccupancySpan],
    drawn: Mapping[str, tuple[str, ...]],
    start: datetime,
    end: datetime,
    idle_gpu_rate: Callable[[datetime], Decimal | None],
) -> Utilisation:
    """The figures of every group with subscriptions over ``[start, end)``."""
    capacity: dict[datetime, dict[str, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    for sub in subs:
        lo, hi = max(sub.starts_at, start), min(sub.ends_at, end)
        mgpu = sub.node.gpus * 1000 * sub.nodes
        for h, seconds in _hours(lo, hi):
            capacity[h][sub.group] += Fraction(mgpu) * Fraction(seconds)
    own: dict[datetime, dict[str, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    own_q: dict[datetime, dict[tuple[str, str], Fraction]] = defaultdict(
        lambda: defaultdict(Fraction)
    )
    idle_use: dict[datetime, Fraction] = defaultdict(Fraction)
    for span in spans:
        groups = drawn.get(span.quota or "", ())
        lo, hi = max(span.start, start), min(span.end, end)
        if hi <= lo or span.mgpu <= 0:
            continue
        if span.billing_mode == "idle" and not groups:
            for h, seconds in _hours(lo, hi):
                idle_use[h] += Fraction(span.mgpu) * Fraction(seconds)
        elif groups and span.billing_mode not in ("idle", "spot"):
            for h, seconds in _hours(lo, hi):
                have = capacity.get(h, {})
                total = sum((have.get(g, Fraction(0)) for g in groups), Fraction(0))
                amount = Fraction(span.mgpu) * Fraction(seconds)
                for g in groups:
                    share = have.get(g, Fraction(0)) / total if total else Fraction(1, len(groups))
                    own[h][g] += amount * share
                    assert span.quota is not None
                    own_q[h][(g, span.quota)] += amount * share
    months: dict[tuple[str, str], GroupMonth] = {}
    for h in sorted(capacity):
        month = _month(h)
        spare: dict[str, Fraction] = {}
        for g, sub_amount in capacity[h].items():
            figures = months.setdefault((g, month), GroupMonth())
            used = own[h].get(g, Fraction(0))
            figures.subscribed += sub_amount
            figures.used += min(used, sub_amount)
            figures.over += max(Fraction(0), used - sub_amount)
            for (gg, quota), amount in own_q[h].items():
                if gg == g:
                    figures.by_quota[quota] += amount
            spare[g] = max(Fraction(0), sub_amount - used)
        lendable = sum(spare.values(), Fraction(0))
        borrowed = min(idle_use.get(h, Fraction(0)), lendable)
        rate = idle_gpu_rate(h) if borrowed else None
        for g, room in spare.items():
            if not lendable or not room:
                continue
            lent = borrowed * room / lendable
            figures = months[(g, month)]
            figures.lent += lent
            if rate is not None:
                figures.lent_paid += lent / 3_600_000 * Fraction(rate)
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
            refunded = {t.term for t in sub.terms if t.ends_at > at}
            deferred = sum(
                t.amount_minor - recognised_by(t, at) for t in sub.terms if t.term in refunded
            )
            out[_month(at)] += deferred - cancelled.refund_minor
    return dict(out)
