"""Why was a job preempted, and what did it lose: each preemption decision naming it as a
victim, with the preemptor, the rule, the quota state that justified it, and the work lost.

The work a preemption lost (:func:`lost_work`, the one computation behind ``jobs why``,
``report preemptions`` and the API's ``/v1/jobs/{uid}/why`` and ``/v1/preemptions``): the
victim's occupancies (its pods, ``projections.inventory.occupancy``) open when the preemption was
decided (started at or before it, not ended before it), each from its start to its end
(the pod held its GPUs through the grace period) or, still releasing, to ``now`` (the
latest projected fact); an occupancy an earlier preemption of the same job already
counted is not counted again (a decision repeated while the pod still releases loses
nothing more). Its GPU-hours, the longest of those runs, and its cost: each occupancy
rated (:func:`ledger.rating.rate_interval`, all the resources it held, its billing mode)
over the projected price schedule, each line rounded as billing posts it; no price book,
or no rate for one of them: no cost.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, select

from ledger.money import plain_decimal, precise_decimal
from ledger.prices import NoApplicableRate, PriceSchedule
from ledger.rating import Occupancy, rate_interval
from ledger.store.base import RecordedEvent
from projections.billing import load_schedule
from projections.inventory import occupancy_table as occupancy
from projections.jobs import job_state

__all__ = ["PREEMPTION_RULES", "LostWork", "lost_work", "preemptions_of"]

#: what each preemption rule (a victim's reason) means, for people
PREEMPTION_RULES: Mapping[str, str] = {
    "WithinQuota": "a higher-priority job of the same quota took its place "
    "(within-quota preemption)",
    "Reclaim": "its quota was borrowing, and a quota lending to it took its guarantee back "
    "(reclaim)",
    "ReclaimWhileBorrowing": "a higher-priority job of another quota took it while itself "
    "borrowing (borrow within cohort)",
    "FairSharing": "fair sharing: its quota's share was above the preemptor's",
}

_US_PER_GPU_HOUR = Decimal(1000 * 3600 * 1_000_000)  # mGPU x microseconds


@dataclass(frozen=True, slots=True)
class LostWork:
    """What one preemption cost its victim (module docstring)."""

    #: the lost runs, each ``[start, until)``
    runs: tuple[Occupancy, ...] = ()
    #: mGPU x microseconds over the runs (exact)
    mgpu_us: int = 0
    currency: str | None = None
    cost_minor: int | None = None
    cost_minor_precise: Decimal | None = None

    @property
    def started_at(self) -> datetime | None:
        """When the earliest lost run started."""
        return min((r.start for r in self.runs), default=None)

    @property
    def seconds(self) -> float:
        """The longest lost run."""
        return max(
            ((r.end - r.start).total_seconds() for r in self.runs if r.end is not None),
            default=0.0,
        )

    @property
    def gpu_hours(self) -> Decimal:
        return Decimal(self.mgpu_us) / _US_PER_GPU_HOUR

    def as_json(self) -> dict[str, Any]:
        """The figures ``jobs why`` shows (``lost_*``)."""
        return {
            "lost_seconds": self.seconds,
            "lost_gpu_hours": round(float(self.gpu_hours), 6),
            "currency": self.currency,
            "lost_cost_minor": self.cost_minor,
            "lost_cost_minor_precise": self.cost_minor_precise,
        }


def lost_work(
    conn: Connection, decisions: Iterable[tuple[str, datetime]], now: datetime | None
) -> dict[tuple[str, datetime], LostWork]:
    """The work lost by each (victim uid, decided at) of ``decisions`` (module docstring);
    ``now`` bounds the runs still releasing (None: the decision)."""
    by_job: dict[str, set[datetime]] = defaultdict(set)
    for uid, at in decisions:
        by_job[uid].add(at)
    if not by_job:
        return {}
    o = occupancy.c
    rows = conn.execute(
        select(occupancy)
        .where(o.job_uid.in_(list(by_job)), o.started_at.is_not(None))
        .order_by(o.started_at, o.occupancy_id)
    ).all()
    runs: dict[str, list[Any]] = defaultdict(list)
    for r in rows:
        runs[r.job_uid].append(r)
    schedule = load_schedule(conn)
    out: dict[tuple[str, datetime], LostWork] = {}
    for uid, instants in by_job.items():
        counted: set[str] = set()
        for at in sorted(instants):
            lost = [
                _run(r, at, now)
                for r in runs[uid]
                if r.occupancy_id not in counted
                and r.started_at <= at
                and (r.ended_at is None or r.ended_at >= at)
            ]
            counted.update(run.occupancy_id for run in lost)
            out[(uid, at)] = _priced(lost, schedule)
    return out


def _run(r: Any, at: datetime, now: datetime | None) -> Occupancy:
    """An occupancy row as a lost run: to its end, or while still releasing to ``now``."""
    until = r.ended_at if r.ended_at is not None else (at if now is None else now)
    return Occupancy(
        occupancy_id=r.occupancy_id,
        job_uid=r.job_uid,
        workspace=r.workspace or "",
        flavor=r.flavor or "gpu/any",
        mgpu=int(r.mgpu or 0),
        cpu_milli=int(r.cpu_milli or 0),
        memory_mib=int(r.memory_mib or 0),
        billing_mode=r.billing_mode or "public",
        start=r.started_at,
        end=max(until, r.started_at),
        quota=r.quota,
        user=r.user or "unknown",
    )


def _priced(lost: list[Occupancy], schedule: PriceSchedule) -> LostWork:
    mgpu_us = 0
    for run in lost:
        span = (run.end or run.start) - run.start
        us = (span.days * 86_400 + span.seconds) * 1_000_000 + span.microseconds
        mgpu_us += us * run.mgpu
    plain = LostWork(tuple(lost), mgpu_us)
    if schedule.currency is None or not lost:
        return plain
    precise = minor = 0
    for run in lost:
        try:
            rated = rate_interval(run, schedule, run.start, run.end or run.start)
        except NoApplicableRate:
            return plain
        # each line rounded, as billing posts it
        minor += rated.total_minor
        precise += rated.total_precise
    return LostWork(
        tuple(lost),
        mgpu_us,
        schedule.currency,
        minor,
        Decimal(plain_decimal(precise_decimal(precise))),
    )


def preemptions_of(
    conn: Connection, uid: str, events: list[RecordedEvent], now: datetime
) -> list[dict[str, Any]]:
    """Each time job ``uid`` was preempted (a decision repeated by the same preemptor
    before the job ran again counts once, at the first)."""
    named = [
        e
        for e in events
        if e.type == "PreemptionDecided"
        and e.data.get("preemptor") != uid
        and any(v.get("job_uid") == uid for v in e.data.get("victims", ()))
    ]
    losses = lost_work(conn, ((uid, e.occurred_at) for e in named), now)
    out: list[dict[str, Any]] = []
    for event in named:
        data = event.data
        mine = next(v for v in data.get("victims", ()) if v.get("job_uid") == uid)
        preemptor = data.get("preemptor")
        if (
            out
            and out[-1]["preemptor"] == preemptor
            and not _restarted(conn, uid, out[-1]["decided_at"], event.occurred_at)
        ):
            continue  # the same preemption decided again while the job still released
        who = conn.execute(
            select(job_state.c.name, job_state.c.priority, job_state.c.quota).where(
                job_state.c.job_uid == preemptor
            )
        ).first()
        rule = str(mine.get("reason") or data.get("reason") or "")
        out.append(
            {
                "decided_at": event.occurred_at,
                "preemptor": preemptor,
                "preemptor_name": who.name if who else None,
                "preemptor_priority": who.priority if who else None,
                "preemptor_quota": data.get("quota") or (who.quota if who else None),
                "rule": rule,
                "rule_text": PREEMPTION_RULES.get(rule, rule),
                "victim_quota": mine.get("quota"),
                "other_victims": [
                    v.get("job_uid") for v in data.get("victims", ()) if v.get("job_uid") != uid
                ],
                "state": data.get("state", {}),
                **losses[(uid, event.occurred_at)].as_json(),
            }
        )
    return out


def _restarted(conn: Connection, uid: str, after: datetime, upto: datetime) -> bool:
    """Whether a pod of job ``uid`` started in (``after``, ``upto``]."""
    o = occupancy.c
    found = conn.execute(
        select(o.occupancy_id)
        .where(o.job_uid == uid, o.started_at > after, o.started_at <= upto)
        .limit(1)
    ).first()
    return found is not None
