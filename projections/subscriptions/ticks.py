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
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from ledger.accounts import transaction_envelope
from ledger.envelopes import Envelope, make_envelope
from ledger.errors import NotFound
from ledger.events import (
    SubscriptionExpired,
    SubscriptionRenewalFailed,
    SubscriptionRenewed,
)
from ledger.ids import deterministic_id
from ledger.store.base import EventStore
from ledger.subscriptions import (
    RELEASE_GRACE,
    RENEWAL_LEAD,
    SpecSchedule,
    Subscription,
    charge_transaction,
    deferred_account,
    recognition_transactions,
)
from ledger.subscriptions.orders import next_term
from projections.subscriptions.reads import load_specs, load_subscriptions, subscription_stream

__all__ = ["RENEWAL_ATTEMPTS", "SCHEDULER_SOURCE", "SubscriptionTick", "advance"]

SCHEDULER_SOURCE = "scheduler/subscriptions"
RENEWAL_ATTEMPTS = 3


@dataclass(frozen=True)
class SubscriptionTick:
    renewed: int
    renewal_failures: int
    expired: int
    recognised: int  # daily recognition transactions posted (new ones)


def _envelope(
    data: SubscriptionRenewed | SubscriptionRenewalFailed | SubscriptionExpired,
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


def _renewals(sub: Subscription, specs: SpecSchedule, now: datetime) -> list[Envelope]:
    out: list[Envelope] = []
    while sub.renews():
        last = sub.last_term
        due = last.ends_at - RENEWAL_LEAD
        attempt = len(sub.renewal_failures) + 1
        when = max(due, last.starts_at) + timedelta(days=attempt - 1)
        if when > now or attempt > RENEWAL_ATTEMPTS or when >= last.ends_at:
            return out
        try:
            term = next_term(sub, specs, when)
        except NotFound as exc:
            failed = SubscriptionRenewalFailed(
                subscription_id=sub.subscription_id,
                term=last.term + 1,
                attempt=attempt,
                error=str(exc),
            )
            out.append(_envelope(failed, sub, when, str(last.term + 1), str(attempt)))
            sub = _with_failure(sub, failed)
            continue
        renewed = SubscriptionRenewed(
            subscription_id=sub.subscription_id, next=term, automatic=True
        )
        envelope = _envelope(renewed, sub, when, str(term.term))
        out.append(envelope)
        sub = _with_term(sub, renewed)
        charge = charge_transaction(sub, term, str(envelope.event_id))
        if charge is not None:
            out.append(transaction_envelope(charge, when, source=SCHEDULER_SOURCE))
    return out


def _with_term(sub: Subscription, renewed: SubscriptionRenewed) -> Subscription:
    return replace(sub, terms=(*sub.terms, renewed.next), renewal_failures=())


def _with_failure(sub: Subscription, failed: SubscriptionRenewalFailed) -> Subscription:
    return replace(sub, renewal_failures=(*sub.renewal_failures, failed))


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


def _recognitions(store: EventStore, sub: Subscription, now: datetime) -> list[Envelope]:
    # the days already posted are on the deferred account's stream: skip them rather
    # than hand the store a year of duplicates every minute
    stream = f"account/{deferred_account(sub.subscription_id)}"
    posted = {r.event_id for r in store.read_stream(stream)}
    out = []
    for at, txn in recognition_transactions(sub, now):
        envelope = transaction_envelope(txn, at, source=SCHEDULER_SOURCE)
        if envelope.event_id not in posted:
            out.append(envelope)
    return out


def advance(store: EventStore, now: datetime) -> SubscriptionTick:
    """Book every renewal, expiry and day of recognition due by ``now``."""
    subs = load_subscriptions(store)
    specs = load_specs(store)
    ordered: list[Envelope] = []
    for sub in subs.values():
        ordered.extend(_renewals(sub, specs, now))
    if ordered:
        store.append(ordered)
        subs = load_subscriptions(store)
    ends: list[Envelope] = []
    days: list[Envelope] = []
    for sub in subs.values():
        ends.extend(_expiry(sub, now))
        days.extend(_recognitions(store, sub, now))
    if ends or days:
        store.append([*ends, *days])
    return SubscriptionTick(
        renewed=sum(1 for e in ordered if e.type == "SubscriptionRenewed"),
        renewal_failures=sum(1 for e in ordered if e.type == "SubscriptionRenewalFailed"),
        expired=len(ends),
        recognised=len(days),
    )
