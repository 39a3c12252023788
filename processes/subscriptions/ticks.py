"""The subscriptions' part of a billing tick: renew, expire, recognise, at cluster time.

Each due action is stamped with the instant it was due, not the instant the tick ran,
so a replay that ticks once at its end books the same renewals, expiries and daily
recognitions as a scheduler ticking every minute, and ids derived from (subscription,
term, day) make a repeated or concurrent tick a no-op (the store collapses duplicates).

- Auto-renewal is ordered from :data:`RENEWAL_LEAD` (3 days) before the last term
  ends, at the price in force then; the new term starts at the old end. A renewal that
  fails (no price for the spec) is retried once a day, :data:`RENEWAL_ATTEMPTS` times,
  then the term is left to expire.
- A term that ends with nothing after it expires: ``SubscriptionExpired``, the
  capacity released after :data:`ledger.subscriptions.RELEASE_GRACE`.
- Every UTC day that has ended is recognised (deferred -> revenue).
- A term whose spec states a delivery commitment is assessed a grace after its service
  ended: its SLA credit for the node-time the cluster did not deliver
  (:mod:`processes.subscriptions.sla`).

Poison (issue 44): a subscription whose due actions cannot be built (a price in force so
large the term's amount breaks its bound, arithmetic that overflows:
:func:`ledger.store.failures.is_poison`) is dead-lettered (source
``scheduler/subscriptions``, reason ``tick-failed``, payload its id) and left as it is;
every other subscription's actions are booked. The next tick tries it again (a fixed price
book lets it renew), the letter reopening while it still fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import orjson

from ledger.accounts import transaction_envelope
from ledger.catalogue import decode
from ledger.envelopes import Envelope, make_envelope
from ledger.errors import NotFound
from ledger.events import (
    SubscriptionExpired,
    SubscriptionRenewalFailed,
)
from ledger.ids import deterministic_id
from ledger.store.base import EventStore, UnitOfWork
from ledger.store.failures import is_poison
from ledger.subscriptions import (
    RELEASE_GRACE,
    RENEWAL_LEAD,
    SpecSchedule,
    Subscription,
    deferred_account,
    recognition_transactions,
)
from processes.subscriptions.renewals import renewal
from processes.subscriptions.sla import sla_credits
from projections.subscriptions import load_specs, load_subscriptions, subscription_stream

__all__ = ["RENEWAL_ATTEMPTS", "SCHEDULER_SOURCE", "SubscriptionTick", "advance"]

SCHEDULER_SOURCE = "scheduler/subscriptions"
#: The reason of a dead letter for a subscription whose due actions cannot be built.
POISON_REASON = "tick-failed"
RENEWAL_ATTEMPTS = 3


@dataclass(frozen=True)
class SubscriptionTick:
    renewed: int
    renewal_failures: int
    expired: int
    recognised: int  # daily recognition transactions posted (new ones)
    sla_assessed: int = 0  # terms assessed for their SLA credit (new ones)
    sla_credited_minor: int = 0  # what those credits came to


def _envelope(
    data: SubscriptionRenewalFailed | SubscriptionExpired,
    sub: Subscription,
    at: datetime,
    *key: str,
) -> Envelope:
    return make_envelope(
        data,
        event_id=deterministic_id("event", data.type_name, sub.subscription_id, *key),
        stream=subscription_stream(sub.subscription_id),
        occurred_at=at,
        observed_at=at,
        source=SCHEDULER_SOURCE,
    )


def _renewals(
    sub: Subscription, specs: SpecSchedule, now: datetime
) -> tuple[list[Envelope], Subscription]:
    """The renewals (and failed attempts) due by ``now``, and ``sub`` after them."""
    out: list[Envelope] = []
    while sub.renews():
        last = sub.last_term
        due = last.ends_at - RENEWAL_LEAD
        attempt = len(sub.renewal_failures) + 1
        when = max(due, last.starts_at) + timedelta(days=attempt - 1)
        if when > now or attempt > RENEWAL_ATTEMPTS or when >= last.ends_at:
            return out, sub
        try:
            batch, renewed_sub = renewal(sub, specs, when, automatic=True, source=SCHEDULER_SOURCE)
        except NotFound as exc:
            failed = SubscriptionRenewalFailed(
                subscription_id=sub.subscription_id,
                term=last.term + 1,
                attempt=attempt,
                error=str(exc),
            )
            out.append(_envelope(failed, sub, when, str(last.term + 1), str(attempt)))
            sub = sub.after(failed)
            continue
        out.extend(batch)
        sub = renewed_sub
    return out, sub


def _expiry(sub: Subscription, now: datetime) -> list[Envelope]:
    if sub.expired is not None or (sub.cancelled and sub.cancelled.mode == "immediately"):
        return []
    if sub.renews() and len(sub.renewal_failures) < RENEWAL_ATTEMPTS:
        return []  # a renewal is still to come (ordered before the end)
    end = sub.ends_at
    if end > now:
        return []
    expired = SubscriptionExpired(
        subscription_id=sub.subscription_id, ended_at=end, released_at=end + RELEASE_GRACE
    )
    return [_envelope(expired, sub, end)]


def _recognitions(uow: UnitOfWork, sub: Subscription, now: datetime) -> list[Envelope]:
    # the days already posted are on the deferred account's stream: skip them rather
    # than hand the store a year of duplicates every minute
    stream = f"account/{deferred_account(sub.subscription_id)}"
    posted = {r.event_id for r in uow.read_stream(stream)}
    out = []
    for at, txn in recognition_transactions(sub, now):
        envelope = transaction_envelope(txn, at, source=SCHEDULER_SOURCE)
        if envelope.event_id not in posted:
            out.append(envelope)
    return out


def advance(store: EventStore, now: datetime) -> SubscriptionTick:
    """Book every renewal, expiry and day of recognition due by ``now``.

    It decides holding the store's append lock (as a cancel or a purchase does), so a
    renewal is never booked for a subscription cancelled meanwhile."""
    with store.transaction() as uow:
        uow.lock_appends()
        specs = load_specs(uow)
        ordered: list[Envelope] = []
        ends: list[Envelope] = []
        days: list[Envelope] = []
        subs = load_subscriptions(uow)
        renewed: dict[str, Subscription] = {}
        for sub in subs.values():
            try:
                renewals, after = _renewals(sub, specs, now)
                sub_ends = _expiry(after, now)
                sub_days = _recognitions(uow, after, now)
            except Exception as exc:
                if not is_poison(exc):
                    raise
                uow.record_dead_letter(
                    source=SCHEDULER_SOURCE,
                    reason=POISON_REASON,
                    error=f"subscription {sub.subscription_id}: {type(exc).__name__}: {exc}",
                    payload=orjson.dumps({"subscription_id": sub.subscription_id}),
                )
                continue
            ordered.extend(renewals)
            ends.extend(sub_ends)
            days.extend(sub_days)
            renewed[sub.subscription_id] = after
        credits = sla_credits(uow, renewed, specs, now, source=SCHEDULER_SOURCE)
        if ordered or ends or days or credits:
            uow.append([*ordered, *ends, *days, *credits])
    assessed = [decode(e) for e in credits if e.type == "SlaCreditIssued"]
    return SubscriptionTick(
        renewed=sum(1 for e in ordered if e.type == "SubscriptionRenewed"),
        renewal_failures=sum(1 for e in ordered if e.type == "SubscriptionRenewalFailed"),
        expired=len(ends),
        recognised=len(days),
        sla_assessed=len(assessed),
        sla_credited_minor=sum(getattr(a, "amount_minor", 0) for a in assessed),
    )
