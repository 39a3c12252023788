"""Rating: turn an occupancy interval into priced segments and line items.

This is where usage becomes money, so it is pure and exact. An interval is cut
wherever the applicable rate may change (a new price book, a spot price change)
and at billing-period boundaries; each piece is a :class:`Segment` priced at the
one rate in force over it. Segments of the same (period, resource) form a
:class:`LineItem`; its segments at one rate form one *part* of it, whose amount is
carried below the minor unit (``ledger.money.to_precise``): what is posted. Whole
minor units appear only where money is owed, on the invoice line
(``ledger.invoices``); ``LineItem.amount_minor`` is for display.

Exactness: a second is 1/3600 of an hour, a repeating decimal, so quantities and
amounts are carried as :class:`~fractions.Fraction` (with the integer ``usage`` in
resource units times microseconds underneath) and rendered as 40-digit Decimals
only for display. Splitting an interval anywhere therefore changes nothing: the
parts add up to the whole exactly.

Accrual (cost to date of a running job) is cumulative: rate ``[start, as_of)``,
compare each line part's precise amount with what was already posted for it, and
post the difference (:func:`accrue`). The deltas telescope, so accruals plus the
final posting equal the final rated amount exactly (at sub-minor precision), and
late price changes self-correct in the next delta.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from decimal import Decimal
from fractions import Fraction
from itertools import pairwise
from typing import NamedTuple
from zoneinfo import ZoneInfo

from ledger.errors import Invalid
from ledger.events import BillingMode, OccupancyEnded, OccupancyStarted
from ledger.money import to_decimal, to_minor, to_precise
from ledger.prices import AppliedRate, PriceSchedule

__all__ = [
    "MICROS_PER_HOUR",
    "RESOURCE_UNITS",
    "BillingPeriod",
    "LineDelta",
    "LineItem",
    "LineKey",
    "Occupancy",
    "PeriodFn",
    "Posted",
    "Rating",
    "ResourceUnit",
    "Segment",
    "accrue",
    "calendar_months",
    "floor_to",
    "next_period",
    "period_end",
    "rate_interval",
    "rate_key",
    "rate_occupancy",
    "rate_to_date",
    "totals_after",
    "usage_quantity",
]

MICROS_PER_HOUR = 3600 * 1_000_000
_MICROSECOND = timedelta(microseconds=1)


# --- inputs ---------------------------------------------------------------------


@dataclass(frozen=True)
class Occupancy:
    """One pod's occupancy of resources, ``[start, end)``; ``end`` is None while open."""

    occupancy_id: str
    job_uid: str
    workspace: str
    flavor: str
    mgpu: int
    cpu_milli: int
    memory_mib: int
    billing_mode: BillingMode
    start: datetime
    end: datetime | None = None
    quota: str | None = None
    user: str = "unknown"
    #: ``training`` (a job), ``service`` or ``notebook``: whose rates apply (ledger.prices)
    workload: str = "training"

    def __post_init__(self) -> None:
        for name in ("mgpu", "cpu_milli", "memory_mib"):
            if getattr(self, name) < 0:
                raise Invalid(f"{name} must be >= 0")
        _require_aware(self.start)
        if self.end is not None:
            _require_aware(self.end)
            if self.end < self.start:
                raise Invalid(f"occupancy {self.occupancy_id} ends before it starts")

    @classmethod
    def from_events(
        cls, started: OccupancyStarted, ended: OccupancyEnded | None = None
    ) -> Occupancy:
        """The interval described by an ``OccupancyStarted`` (and its ``OccupancyEnded``)."""
        if ended is not None and ended.occupancy_id != started.occupancy_id:
            raise Invalid("OccupancyEnded belongs to another occupancy")
        return cls(
            occupancy_id=started.occupancy_id,
            job_uid=started.job_uid,
            workspace=started.workspace,
            quota=started.quota,
            user=started.user,
            flavor=started.flavor,
            mgpu=started.mgpu,
            cpu_milli=started.cpu_milli,
            memory_mib=started.memory_mib,
            billing_mode=started.billing_mode,
            start=started.started_at,
            end=None if ended is None else max(ended.ended_at, started.started_at),
        )


@dataclass(frozen=True)
class ResourceUnit:
    """How a resource is metered: occupancy field, billing unit and units per billing unit."""

    unit: str  # "GPU-hour", "core-hour", "GiB-hour"
    per_unit: int  # mGPU per GPU, milli-cores per core, MiB per GiB


#: Billing units by resource kind; the GPU resource key is the occupancy's flavor.
RESOURCE_UNITS: dict[str, ResourceUnit] = {
    "gpu": ResourceUnit("GPU-hour", 1000),
    "cpu": ResourceUnit("core-hour", 1000),
    "memory": ResourceUnit("GiB-hour", 1024),
}


def _kind(resource: str) -> str:
    return "gpu" if resource.startswith("gpu/") else resource


def usage_quantity(resource: str, usage: int) -> Fraction:
    """Exact quantity in billing units (GPU-hours, ...) of ``usage`` unit-microseconds."""
    return Fraction(usage, RESOURCE_UNITS[_kind(resource)].per_unit * MICROS_PER_HOUR)


# --- billing periods --------------------------------------------------------------


@dataclass(frozen=True)
class BillingPeriod:
    """A billing period ``[start, end)`` (UTC instants) and its key (``"2026-01"``)."""

    key: str
    start: datetime
    end: datetime


PeriodFn = Callable[[datetime], BillingPeriod]


def calendar_months(tz: str | tzinfo = "UTC") -> PeriodFn:
    """Periods = calendar months in ``tz`` (default UTC): the period containing an instant."""
    zone: tzinfo = ZoneInfo(tz) if isinstance(tz, str) else tz

    def period_of(t: datetime) -> BillingPeriod:
        local = _require_aware(t).astimezone(zone)
        first = datetime(local.year, local.month, 1, tzinfo=zone)
        nxt = datetime(local.year + local.month // 12, local.month % 12 + 1, 1, tzinfo=zone)
        return BillingPeriod(
            f"{local.year:04d}-{local.month:02d}", first.astimezone(UTC), nxt.astimezone(UTC)
        )

    return period_of


_UTC_MONTHS = calendar_months()


def period_end(key: str, periods: PeriodFn) -> datetime:
    """The end of the period named ``key`` (``"2026-11"``) under ``periods``."""
    year, month = (int(p) for p in key.split("-"))
    return periods(datetime(year, month, 15, tzinfo=UTC)).end


def next_period(period: str, periods: PeriodFn) -> str:
    """The key of the period after ``period`` (``"2026-11"`` -> ``"2026-12"``)."""
    return periods(period_end(period, periods)).key


def floor_to(t: datetime, step: timedelta) -> datetime:
    """``t`` rounded down to a multiple of ``step`` since the Unix epoch (UTC): accrual
    instants, so ids stay stable however often ticks run."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return epoch + ((t - epoch) // step) * step


# --- outputs -------------------------------------------------------------------------


class LineKey(NamedTuple):
    """Identity of a line item part: what accruals are tracked and transactions keyed by.

    ``rate`` (:func:`rate_key`) names the part of the line rated at one rate; ``""``
    is the whole line (a line item's own key, and postings made before parts existed).
    """

    occupancy_id: str
    period: str
    resource: str
    billing_mode: BillingMode
    rate: str = ""


def rate_key(rate: Decimal) -> str:
    """The canonical text of a rate (``2.40`` -> ``"2.4"``), for keys and ids."""
    text = format(rate, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text or "0"


@dataclass(frozen=True)
class Segment:
    """A piece of an interval over which one rate applied, within one billing period."""

    start: datetime
    end: datetime
    period: str
    resource: str
    billing_mode: BillingMode
    rate: AppliedRate
    usage: int  # resource units times microseconds (mGPU·µs, milli-core·µs, MiB·µs)
    quantity_exact: Fraction
    amount_exact: Fraction  # unrounded, in currency units

    @property
    def quantity(self) -> Decimal:
        return to_decimal(self.quantity_exact)

    @property
    def amount(self) -> Decimal:
        return to_decimal(self.amount_exact)


@dataclass(frozen=True)
class LineItem:
    """One (occupancy/job x period x resource x billing mode) charge, rounded once."""

    occupancy: Occupancy
    period: str
    resource: str
    billing_mode: BillingMode
    unit: str
    currency: str
    scale: int
    segments: tuple[Segment, ...]
    usage: int = field(init=False)
    quantity_exact: Fraction = field(init=False)
    amount_exact: Fraction = field(init=False)
    amount_minor: int = field(init=False)

    def __post_init__(self) -> None:
        usage = sum(s.usage for s in self.segments)
        amount = sum((s.amount_exact for s in self.segments), Fraction(0))
        object.__setattr__(self, "usage", usage)
        object.__setattr__(self, "quantity_exact", usage_quantity(self.resource, usage))
        object.__setattr__(self, "amount_exact", amount)
        object.__setattr__(self, "amount_minor", to_minor(amount, self.scale))

    @property
    def key(self) -> LineKey:
        return LineKey(self.occupancy.occupancy_id, self.period, self.resource, self.billing_mode)

    def parts(self) -> dict[str, tuple[Decimal, int, int]]:
        """Per rate (:func:`rate_key`): the rate, usage and precise amount of its segments.

        The precise amount of each part is rounded once (to 10**-9 minor units)
        from its exact sum; these are the amounts the ledger posts.
        """
        sums: dict[str, tuple[Decimal, int, Fraction]] = {}
        for seg in self.segments:
            key = rate_key(seg.rate.rate)
            _, usage, amount = sums.get(key, (seg.rate.rate, 0, Fraction(0)))
            sums[key] = (seg.rate.rate, usage + seg.usage, amount + seg.amount_exact)
        return {k: (r, u, to_precise(a, self.scale)) for k, (r, u, a) in sums.items()}

    @property
    def amount_precise(self) -> int:
        """The line's amount as posted: the sum of its parts' precise amounts."""
        return sum(p for _, _, p in self.parts().values())

    @property
    def job_uid(self) -> str:
        return self.occupancy.job_uid

    @property
    def workspace(self) -> str:
        return self.occupancy.workspace

    @property
    def quantity(self) -> Decimal:
        """Quantity in :attr:`unit` (e.g. GPU-hours), 40 significant digits."""
        return to_decimal(self.quantity_exact)

    @property
    def amount(self) -> Decimal:
        """The unrounded amount in currency units, 40 significant digits."""
        return to_decimal(self.amount_exact)


@dataclass(frozen=True)
class Rating:
    """The rating of ``occupancy`` over ``[start, end)``."""

    occupancy: Occupancy
    start: datetime
    end: datetime
    currency: str
    scale: int
    lines: tuple[LineItem, ...]

    @property
    def segments(self) -> tuple[Segment, ...]:
        return tuple(s for line in self.lines for s in line.segments)

    @property
    def total_minor(self) -> int:
        return sum(line.amount_minor for line in self.lines)

    @property
    def total_precise(self) -> int:
        return sum(line.amount_precise for line in self.lines)

    def line(self, period: str, resource: str) -> LineItem:
        for item in self.lines:
            if item.period == period and item.resource == resource:
                return item
        raise KeyError((period, resource))


# --- rating -------------------------------------------------------------------------


def _resources(occ: Occupancy) -> list[tuple[str, int]]:
    items = [(occ.flavor, occ.mgpu), ("cpu", occ.cpu_milli), ("memory", occ.memory_mib)]
    return [(resource, units) for resource, units in items if units > 0]


def _period_boundaries(start: datetime, end: datetime, periods: PeriodFn) -> list[datetime]:
    bounds = []
    p = periods(start)
    while p.end < end:
        if p.end <= p.start:  # a period function must move forward
            raise Invalid(f"billing period {p.key} does not advance")
        bounds.append(p.end)
        p = periods(p.end)
    return bounds


def rate_interval(
    occ: Occupancy,
    schedule: PriceSchedule,
    start: datetime,
    end: datetime,
    periods: PeriodFn = _UTC_MONTHS,
) -> Rating:
    """Rate ``occ``'s resources over ``[start, end)`` (any sub-interval of its occupancy).

    Raises :class:`~ledger.prices.NoApplicableRate` when a charged resource has no
    rate at some instant (quota mode needs only a book for the currency).
    """
    start, end = _require_aware(start).astimezone(UTC), _require_aware(end).astimezone(UTC)
    if end < start:
        raise Invalid("rating interval ends before it starts")
    if schedule.currency is None or schedule.scale is None:
        raise Invalid("the price schedule holds no price book: currency unknown")
    mode = occ.billing_mode
    lines: list[LineItem] = []
    if end > start:
        bounds = _period_boundaries(start, end, periods)
        for resource, units in _resources(occ):
            points = sorted(
                {start, end, *bounds, *schedule.change_points(start, end, resource, mode)}
            )
            by_period: dict[str, list[Segment]] = {}
            for a, b in pairwise(points):
                applied = schedule.rate_at(resource, mode, a, occ.workload)
                usage = units * ((b - a) // _MICROSECOND)
                quantity = usage_quantity(resource, usage)
                period = periods(a).key
                by_period.setdefault(period, []).append(
                    Segment(
                        start=a,
                        end=b,
                        period=period,
                        resource=resource,
                        billing_mode=mode,
                        rate=applied,
                        usage=usage,
                        quantity_exact=quantity,
                        amount_exact=Fraction(applied.rate) * quantity,
                    )
                )
            unit = RESOURCE_UNITS[_kind(resource)].unit
            for period, segments in by_period.items():
                lines.append(
                    LineItem(
                        occupancy=occ,
                        period=period,
                        resource=resource,
                        billing_mode=mode,
                        unit=unit,
                        currency=schedule.currency,
                        scale=schedule.scale,
                        segments=tuple(segments),
                    )
                )
    lines.sort(key=lambda li: (li.period, li.resource))
    return Rating(occ, start, end, schedule.currency, schedule.scale, tuple(lines))


def rate_occupancy(
    occ: Occupancy, schedule: PriceSchedule, periods: PeriodFn = _UTC_MONTHS
) -> Rating:
    """The final rating of a closed occupancy over ``[start, end)``."""
    if occ.end is None:
        raise Invalid(f"occupancy {occ.occupancy_id} is still open: use rate_to_date")
    return rate_interval(occ, schedule, occ.start, occ.end, periods)


def rate_to_date(
    occ: Occupancy, schedule: PriceSchedule, as_of: datetime, periods: PeriodFn = _UTC_MONTHS
) -> Rating:
    """Cumulative rating ``[start, min(end, as_of))``: the cost to date of a (running) job."""
    as_of = _require_aware(as_of)
    stop = as_of if occ.end is None else min(occ.end, as_of)
    return rate_interval(occ, schedule, occ.start, max(stop, occ.start), periods)


# --- accrual ------------------------------------------------------------------------


@dataclass(frozen=True)
class Posted:
    """What has been posted so far for one line key (sums over its transactions)."""

    usage: int = 0
    amount_precise: int = 0  # 10**-9 minor units (ledger.money.to_precise)


@dataclass(frozen=True)
class LineDelta:
    """What to post now for one line part: cumulative minus what was already posted."""

    line: LineItem  # the whole line, cumulative as of ``as_of``
    rate: str  # the part (rate_key); "" for postings of a whole line being taken back
    usage: int
    amount_precise: int
    as_of: datetime
    final: bool  # the occupancy has ended and ``as_of`` covers its end
    rate_value: Decimal | None = None

    @property
    def key(self) -> LineKey:
        return self.line.key._replace(rate=self.rate)

    @property
    def quantity(self) -> Decimal:
        return to_decimal(usage_quantity(self.line.resource, self.usage))

    @property
    def step(self) -> str:
        """The cumulative step this delta brings the line to (part of the transaction id).

        Formatted here, not by the canonical JSON helpers, so ids never move when
        a display format does: UTC, microseconds, ``Z``.
        """
        return self.as_of.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def accrue(
    occ: Occupancy,
    schedule: PriceSchedule,
    as_of: datetime,
    posted: Mapping[LineKey, Posted] | None = None,
    periods: PeriodFn = _UTC_MONTHS,
) -> tuple[LineDelta, ...]:
    """Deltas to post so the ledger holds ``occ``'s cost up to ``as_of``.

    ``posted`` is what earlier accruals of this occupancy posted per line key (one
    per rate part). Call it on every tick with ``as_of = now`` and once more when
    the occupancy ends (any ``as_of >= end`` gives the final amounts). Parts whose
    usage and amount are both unchanged yield no delta; a part that vanished (e.g.
    the end was corrected earlier) yields a negative one.
    """
    posted = posted or {}
    as_of = _require_aware(as_of).astimezone(UTC)
    cumulative = rate_to_date(occ, schedule, as_of, periods)
    final = occ.end is not None and as_of >= occ.end
    current: dict[LineKey, tuple[LineItem, Decimal | None, int, int]] = {}
    for line in cumulative.lines:
        for rate, part in line.parts().items():
            current[line.key._replace(rate=rate)] = (line, *part)
    for key in posted:
        if key.occupancy_id != occ.occupancy_id:
            raise Invalid(f"posted totals for {key} do not belong to {occ.occupancy_id}")
        if key not in current:
            empty = LineItem(
                occupancy=occ,
                period=key.period,
                resource=key.resource,
                billing_mode=key.billing_mode,
                unit=RESOURCE_UNITS[_kind(key.resource)].unit,
                currency=cumulative.currency,
                scale=cumulative.scale,
                segments=(),
            )
            current[key] = (empty, Decimal(key.rate) if key.rate else None, 0, 0)
    deltas = []
    for key in sorted(current):
        line, value, usage, precise = current[key]
        before = posted.get(key, Posted())
        d_usage, d_amount = usage - before.usage, precise - before.amount_precise
        if d_usage or d_amount:
            deltas.append(LineDelta(line, key.rate, d_usage, d_amount, as_of, final, value))
    return tuple(deltas)


def totals_after(
    posted: Mapping[LineKey, Posted], deltas: Iterable[LineDelta]
) -> dict[LineKey, Posted]:
    """``posted`` with ``deltas`` applied: the state to pass to the next :func:`accrue`."""
    out = dict(posted)
    for d in deltas:
        before = out.get(d.key, Posted())
        out[d.key] = Posted(before.usage + d.usage, before.amount_precise + d.amount_precise)
    return out


def _require_aware(t: datetime) -> datetime:
    if t.tzinfo is None or t.utcoffset() is None:
        raise Invalid(f"naive datetime {t!r}: instants must be timezone-aware")
    return t
