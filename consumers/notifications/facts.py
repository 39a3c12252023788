"""Stored events as the facts rules name (:class:`ledger.notifications.Fact`).

A job's facts carry what its ``JobSubmitted`` said (workspace, quota, billing mode, name,
user), read from its own stream up to the fact's position, so a fact's context is what
was known when it happened. A budget's ``NotificationQueued`` (the crossing's own note,
target ``workspace/<ws>``) is the ``BudgetExceeded`` fact: delivering it through the
workspace's rules is what delivers budget notifications. A fact carries only its
workspace's data: a preemption's victims in other workspaces are a count by reason, never
their ids, names, users or quotas. A rule the sender disabled (``410 Gone``) is the
``RuleDisabled`` fact of the rule's workspace. An ``InvoiceOverdue`` is its invoice's
workspace's fact (the invoice, its period and what is still open).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from consumers.notifications.quarantine import quarantine
from ledger.catalogue import decode
from ledger.events import (
    AdmissionDecided,
    InvoiceOverdue,
    JobSubmitted,
    NotificationQueued,
    NotificationRuleDisabled,
    PreemptionDecided,
    SubscriptionExpired,
    SubscriptionPurchased,
)
from ledger.notifications import JOB_FACTS, Fact
from ledger.store.base import RecordedEvent, UnitOfWork

__all__ = ["FACT_TYPES", "facts_of"]

FACT_TYPES = frozenset(
    {
        *JOB_FACTS,
        "AdmissionDecided",
        "PreemptionDecided",
        "NotificationQueued",
        "SubscriptionExpired",
        "NotificationRuleDisabled",
        "InvoiceOverdue",
    }
)


class _Jobs:
    """Each job's submission, read for the whole window in one query."""

    def __init__(self, uow: UnitOfWork, records: list[RecordedEvent]) -> None:
        uids = {uid for r in records for uid in _uids_of(r)}
        upto = max((r.position for r in records), default=0)
        self.seen: dict[str, tuple[int, JobSubmitted]] = {}
        streams = sorted(f"job/{uid}" for uid in uids)
        for record in uow.read_streams(streams, before=upto + 1) if streams else ():
            if record.type == "JobSubmitted" and record.stream[4:] not in self.seen:
                data = decode(record.envelope)
                assert isinstance(data, JobSubmitted)
                self.seen[record.stream[4:]] = (record.position, data)

    def submitted(self, uid: str, position: int) -> JobSubmitted | None:
        found = self.seen.get(uid)
        return found[1] if found is not None and found[0] <= position else None


def _uids_of(record: RecordedEvent) -> list[str]:
    """The jobs a record is about (a preemption: the preemptor and its victims)."""
    if record.type in JOB_FACTS or record.type == "AdmissionDecided":
        return [str(record.data["job_uid"])]
    if record.type == "PreemptionDecided":
        victims = record.data.get("victims") or []
        return [str(record.data["preemptor"]), *(str(v["job_uid"]) for v in victims)]
    return []


def _victims(jobs: _Jobs, p: PreemptionDecided, position: int) -> dict[str, Any]:
    """The victims as the preemptor's workspace may see them: its own in full, another
    workspace's only as a count by reason (no uid, name, user or quota of theirs)."""
    preemptor = jobs.submitted(p.preemptor, position)
    own = preemptor.workspace if preemptor is not None else None
    mine: list[dict[str, str]] = []
    elsewhere: dict[str, int] = {}
    for v in p.victims:
        victim = jobs.submitted(v.job_uid, position)
        if own is not None and victim is not None and victim.workspace == own:
            mine.append({"job_uid": v.job_uid, "quota": v.quota, "reason": v.reason})
        else:
            elsewhere[v.reason] = elsewhere.get(v.reason, 0) + 1
    out: dict[str, Any] = {"victims": mine, "reason": p.reason}
    if elsewhere:
        out["victims_in_other_workspaces"] = [
            {"reason": reason, "count": n} for reason, n in sorted(elsewhere.items())
        ]
    return out


def _job_fact(
    jobs: _Jobs, event: str, uid: str, record: RecordedEvent, data: dict[str, Any]
) -> Fact:
    job = jobs.submitted(uid, record.position)
    return Fact(
        event=event,
        occurred_at=record.occurred_at,
        cause=str(record.event_id),
        workspace=job.workspace if job else None,
        quota=job.quota if job else None,
        billing_mode=job.billing_mode if job else None,
        job_uid=uid,
        job_name=job.name if job else None,
        user=job.user if job else None,
        data=data,
    )


def facts_of(uow: UnitOfWork, records: list[RecordedEvent]) -> list[Fact]:
    """The facts in ``records`` (store order). A record that cannot be read as a fact is
    quarantined as a dead letter (source ``notifications/matcher``) and the rest go on."""
    jobs = _Jobs(uow, records)
    out: list[Fact] = []
    for record in records:
        try:
            _fact_of(uow, jobs, record, out)
        except SQLAlchemyError:
            raise  # the database's, not the record's: the round is retried
        except Exception as exc:
            quarantine(uow, "a stored event the matcher cannot read", record.envelope, exc)
    return out


def _fact_of(uow: UnitOfWork, jobs: _Jobs, record: RecordedEvent, out: list[Fact]) -> None:
    """Append the fact ``record`` gives (if any) to ``out``."""
    kind = record.type
    if kind in JOB_FACTS:
        d = record.data
        details = {k: d[k] for k in ("reason", "by") if d.get(k)}
        out.append(_job_fact(jobs, kind, d["job_uid"], record, details))
    elif kind == "AdmissionDecided":
        a = decode(record.envelope)
        assert isinstance(a, AdmissionDecided)
        if a.outcome == "admit" and a.borrowing:
            out.append(
                _job_fact(jobs, "QuotaOverAdmission", a.job_uid, record, {"admitted_to": a.quota})
            )
    elif kind == "PreemptionDecided":
        p = decode(record.envelope)
        assert isinstance(p, PreemptionDecided)
        out.append(
            _job_fact(
                jobs,
                "PreemptionDecided",
                p.preemptor,
                record,
                _victims(jobs, p, record.position),
            )
        )
    elif kind == "NotificationQueued":
        n = decode(record.envelope)
        assert isinstance(n, NotificationQueued)
        if n.rule is None and n.target.startswith("workspace/"):
            out.append(
                Fact(
                    event="BudgetExceeded",
                    occurred_at=record.occurred_at,
                    cause=str(record.event_id),
                    workspace=n.target.removeprefix("workspace/"),
                    data={"subject": n.subject, **n.body},
                )
            )
    elif kind == "NotificationRuleDisabled":
        off = decode(record.envelope)
        assert isinstance(off, NotificationRuleDisabled)
        out.append(
            Fact(
                event="RuleDisabled",
                occurred_at=record.occurred_at,
                cause=str(record.event_id),
                workspace=off.workspace,
                data={"disabled_rule": f"{off.workspace}/{off.name}", "reason": off.reason},
            )
        )
    elif kind == "InvoiceOverdue":
        due = decode(record.envelope)
        assert isinstance(due, InvoiceOverdue)
        out.append(
            Fact(
                event="InvoiceOverdue",
                occurred_at=record.occurred_at,
                cause=str(record.event_id),
                workspace=due.workspace,
                data={
                    "invoice_id": due.invoice_id,
                    "period": due.period,
                    "open_minor": due.open_minor,
                    "currency": due.currency,
                    "due_at": due.due_at.isoformat(),
                    "due_days": due.due_days,
                },
            )
        )
    elif kind == "SubscriptionExpired":
        e = decode(record.envelope)
        assert isinstance(e, SubscriptionExpired)
        bought = uow.read_stream(record.stream, upto=record.position)
        first = decode(bought[0].envelope) if bought else None
        payer = first.workspace if isinstance(first, SubscriptionPurchased) else None
        out.append(
            Fact(
                event="SubscriptionExpired",
                occurred_at=record.occurred_at,
                cause=str(record.event_id),
                workspace=payer,
                data={
                    "subscription_id": e.subscription_id,
                    "released_at": e.released_at.isoformat(),
                },
            )
        )
