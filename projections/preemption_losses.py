"""Why was a job preempted, and what did it lose: each preemption decision naming it as a
victim, with the preemptor, the rule, the quota state that justified it, and the work lost
(its pods' occupancy since their last start) rated at the job's own rate.

The work lost is each occupancy of the job open when the preemption was decided, from its
start to its end (or now, while it still releases); its cost is the occupancy rated
(:func:`ledger.rating.rate_interval`, all the resources it held, its billing mode) over the
projected price schedule, as billing rates it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, select

from ledger.money import plain_decimal, precise_decimal
from ledger.prices import NoApplicableRate
from ledger.rating import Occupancy, rate_interval
from ledger.store.base import RecordedEvent
from projections.billing_reads import load_schedule
from projections.jobs.tables import job_state
from projections.occupancy import occupancy

__all__ = ["PREEMPTION_RULES", "preemptions_of"]

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


def _lost_work(
    conn: Connection, uid: str, decided_at: datetime, now: datetime
) -> list[dict[str, Any]]:
    """The job's occupancies open when a preemption of it was decided: the work since its
    pods last started, lost, each as [start, its end, or now while still releasing)."""
    o = occupancy.c
    rows = conn.execute(
        select(occupancy).where(
            o.job_uid == uid,
            o.started_at.is_not(None),
            o.started_at <= decided_at,
            (o.ended_at.is_(None)) | (o.ended_at >= decided_at),
        )
    ).all()
    return [dict(r._mapping) | {"until": r.ended_at or max(now, r.started_at)} for r in rows]


def _lost_cost(conn: Connection, lost: list[dict[str, Any]]) -> dict[str, Any]:
    """GPU-hours and their cost at the job's rate (its billing mode, the price book then)."""
    mgpu_seconds = sum(
        int(r["mgpu"] or 0) * (r["until"] - r["started_at"]).total_seconds() for r in lost
    )
    out: dict[str, Any] = {
        "lost_seconds": max(
            ((r["until"] - r["started_at"]).total_seconds() for r in lost), default=0.0
        ),
        "lost_gpu_hours": round(mgpu_seconds / 1000 / 3600, 6),
        "currency": None,
        "lost_cost_minor": None,
        "lost_cost_minor_precise": None,
    }
    schedule = load_schedule(conn)
    if schedule.currency is None or not lost:
        return out
    precise = minor = 0
    for r in lost:
        occ = Occupancy(
            occupancy_id=r["occupancy_id"],
            job_uid=r["job_uid"],
            workspace=r["workspace"] or "",
            flavor=r["flavor"] or "gpu/any",
            mgpu=int(r["mgpu"] or 0),
            cpu_milli=int(r["cpu_milli"] or 0),
            memory_mib=int(r["memory_mib"] or 0),
            billing_mode=r["billing_mode"] or "public",
            start=r["started_at"],
            end=r["until"],
            quota=r["quota"],
            user=r["user"] or "unknown",
        )
        try:
            rated = rate_interval(occ, schedule, occ.start, r["until"])
        except NoApplicableRate:
            return out
        # each line rounded, as billing posts it and as `report preemptions` sums it
        minor += rated.total_minor
        precise += rated.total_precise
    out["currency"] = schedule.currency
    out["lost_cost_minor"] = minor
    out["lost_cost_minor_precise"] = Decimal(plain_decimal(precise_decimal(precise)))
    return out


def preemptions_of(
    conn: Connection, uid: str, events: list[RecordedEvent], now: datetime
) -> list[dict[str, Any]]:
    """Each time job ``uid`` was preempted (a decision repeated by the same preemptor
    before the job ran again counts once, at the first)."""
    out: list[dict[str, Any]] = []
    for event in events:
        data = event.data
        if event.type != "PreemptionDecided" or data.get("preemptor") == uid:
            continue
        mine = next((v for v in data.get("victims", ()) if v.get("job_uid") == uid), None)
        if mine is None:
            continue
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
                **_lost_cost(conn, _lost_work(conn, uid, event.occurred_at, now)),
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
