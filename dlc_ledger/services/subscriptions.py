"""Subscriptions as use cases: purchase, renew, cancel, and what they hold.

Each write decides on the subscriptions as stored (folded from the store at the head),
appends the subscription's event and its ledger transaction together on stream
``subscription/<id>`` (expecting the version it read, so two cancels cannot both
refund), then brings every read model to the head. Instants are cluster time: ``--at``,
else the wall clock or a replay's virtual one (:func:`billing_instant`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dlc_ledger.services.clocks import billing_instant
from ledger.accounts import transaction_envelope
from ledger.canonical import format_timestamp
from ledger.envelopes import EventData, make_envelope
from ledger.errors import Conflict, Invalid, NotFound
from ledger.events import (
    SubscriptionCancelled,
    SubscriptionPurchased,
    SubscriptionRenewed,
    SubscriptionTermUnit,
)
from ledger.ids import deterministic_id
from ledger.money import plain_decimal
from ledger.store.base import EventStore
from ledger.subscriptions import (
    Refund,
    Subscription,
    charge_transaction,
    fold_subscriptions,
    refund_for,
    refund_transaction,
)
from ledger.subscriptions.orders import next_term, order_term
from projections.registry import catch_up_all
from projections.subscriptions import load_specs, load_subscriptions, subscription_stream

__all__ = [
    "Cancellation",
    "Order",
    "cancel",
    "find_subscription",
    "purchase",
    "renew",
    "subscription_row",
    "subscriptions",
    "term_rows",
]


@dataclass(frozen=True)
class Order:
    """A purchase or renewal: the subscription after it, and whether it was new."""

    subscription: Subscription
    created: bool
    dry_run: bool = False


@dataclass(frozen=True)
class Cancellation:
    subscription: Subscription
    refund: Refund
    dry_run: bool = False


def _instant(store: EventStore, at: datetime | None) -> datetime:
    if at is not None:
        if at.tzinfo is None:
            raise Invalid("instants must carry a UTC offset")
        return at
    return billing_instant(store, None).at


def subscriptions(store: EventStore) -> list[Subscription]:
    """Every subscription, in order of start then id."""
    return sorted(
        load_subscriptions(store).values(), key=lambda s: (s.starts_at, s.subscription_id)
    )


def find_subscription(store: EventStore, subscription_id: str) -> Subscription:
    sub = load_subscriptions(store).get(subscription_id)
    if sub is None:
        raise NotFound(f"no subscription {subscription_id!r} (see: subscriptions list)")
    return sub


def _after(sub: Subscription, *events: EventData) -> Subscription:
    folded = fold_subscriptions([_purchase_of(sub), *events])
    return folded[sub.subscription_id]


def _purchase_of(sub: Subscription) -> SubscriptionPurchased:
    return SubscriptionPurchased(
        subscription_id=sub.subscription_id,
        group=sub.group,
        spec=sub.spec,
        nodes=sub.nodes,
        workspace=sub.workspace,
        auto_renew=sub.auto_renew,
        currency=sub.currency,
        scale=sub.scale,
        node=sub.node,
        first=sub.terms[0],
        key=sub.key,
    )


def purchase(
    store: EventStore,
    *,
    group: str,
    spec: str,
    nodes: int,
    term: SubscriptionTermUnit,
    workspace: str,
    principal: str,
    auto_renew: bool = False,
    at: datetime | None = None,
    key: str | None = None,
    dry_run: bool = False,
) -> Order:
    """Buy ``nodes`` nodes of ``spec`` into ``group`` for a ``term``, paid by ``workspace``.

    The id derives from ``key`` (an idempotency key: a repeat returns the existing one, a
    key reused for another purchase is refused) or, without one, from the purchase itself,
    so an identical purchase is refused rather than doubled: pass a ``key`` to buy twice.
    """
    if nodes < 1:
        raise Invalid(f"--nodes must be at least 1, got {nodes}")
    if key is not None and not key.strip():
        raise Invalid("--key must not be empty")
    start = _instant(store, at)
    specs = load_specs(store)
    first = order_term(specs, spec, term, nodes, term=1, starts_at=start, ordered_at=start)
    section = specs.section_at(start)
    current = load_subscriptions(store)
    for other in current.values():
        if other.group == group and other.spec != spec:
            raise Conflict(
                f"resource group {group!r} holds nodes of spec {other.spec!r} "
                f"({other.subscription_id}); a group holds one spec: use another group"
            )
    identity = key or "|".join((group, spec, str(nodes), term, start.isoformat(), workspace))
    sub_id = "sub-" + str(deterministic_id("subscription", identity))[:13]
    event = SubscriptionPurchased(
        subscription_id=sub_id,
        group=group,
        spec=spec,
        nodes=nodes,
        workspace=workspace,
        auto_renew=auto_renew,
        currency=section.currency,
        scale=section.scale,
        node=section.specs[spec],
        first=first,
        key=key,
    )
    existing = current.get(sub_id)
    if existing is not None:
        if key is None:
            raise Conflict(
                f"an identical purchase exists ({sub_id}: {nodes} x {spec} in {group} from "
                f"{start.isoformat()} for {workspace}); pass --key to buy another"
            )
        if _purchase_of(existing).model_copy(update={"auto_renew": auto_renew}) != event:
            raise Conflict(
                f"idempotency key {key!r} was used for purchase {sub_id} "
                f"({existing.nodes} x {existing.spec} in {existing.group}); use a new key"
            )
        return Order(existing, created=False)
    sub = fold_subscriptions([event])[sub_id]
    if dry_run:
        return Order(sub, created=False, dry_run=True)
    envelope = make_envelope(
        event,
        event_id=deterministic_id("event", "SubscriptionPurchased", sub_id),
        stream=subscription_stream(sub_id),
        occurred_at=start,
        observed_at=start,
        source=principal,
    )
    charge = charge_transaction(sub, first, str(envelope.event_id))
    batch = [envelope] + ([transaction_envelope(charge, start, source=principal)] if charge else [])
    store.append(batch, expected_versions={subscription_stream(sub_id): 0})
    catch_up_all(store)
    return Order(sub, created=True)


def renew(
    store: EventStore,
    subscription_id: str,
    *,
    principal: str,
    at: datetime | None = None,
    dry_run: bool = False,
) -> Order:
    """Order the next term by hand, at the price in force now; it starts at the last
    term's end. Refused for a cancelled or expired subscription, or one already renewed."""
    sub = find_subscription(store, subscription_id)
    now = _instant(store, at)
    if sub.cancelled is not None:
        raise Conflict(f"subscription {subscription_id} is cancelled: buy a new one instead")
    if sub.expired is not None or now >= sub.ends_at:
        raise Conflict(
            f"subscription {subscription_id} expired at {sub.ends_at.isoformat()}: "
            "buy a new one instead"
        )
    if sub.last_term.starts_at > now:
        raise Conflict(
            f"subscription {subscription_id} is already renewed until "
            f"{sub.last_term.ends_at.isoformat()} (term {sub.last_term.term} not started)"
        )
    term = next_term(sub, load_specs(store), now)
    renewed = SubscriptionRenewed(subscription_id=subscription_id, next=term, automatic=False)
    after = _after(sub, *_later_events(sub), renewed)
    if dry_run:
        return Order(after, created=False, dry_run=True)
    stream = subscription_stream(subscription_id)
    envelope = make_envelope(
        renewed,
        event_id=deterministic_id("event", "SubscriptionRenewed", subscription_id, str(term.term)),
        stream=stream,
        occurred_at=now,
        observed_at=now,
        source=principal,
    )
    charge = charge_transaction(after, term, str(envelope.event_id))
    batch = [envelope] + ([transaction_envelope(charge, now, source=principal)] if charge else [])
    store.append(batch, expected_versions={stream: store.stream_version(stream)})
    catch_up_all(store)
    return Order(after, created=True)


def _later_events(sub: Subscription) -> list[EventData]:
    events: list[EventData] = [
        SubscriptionRenewed(subscription_id=sub.subscription_id, next=t) for t in sub.terms[1:]
    ]
    events.extend(sub.renewal_failures)
    if sub.cancelled is not None:
        events.append(sub.cancelled)
    if sub.expired is not None:
        events.append(sub.expired)
    return events


def _no_reason_available(subs: dict[str, Subscription], workspace: str, at: datetime) -> bool:
    return not any(
        s.cancelled is not None
        and s.cancelled.no_reason
        and s.workspace == workspace
        and s.cancelled.effective_at.year == at.year
        for s in subs.values()
    )


def cancel(
    store: EventStore,
    subscription_id: str,
    *,
    principal: str,
    immediately: bool = False,
    at: datetime | None = None,
    reason: str = "",
    dry_run: bool = False,
) -> Cancellation:
    """Unsubscribe: by default at the end of the running term (no refund; a renewal
    ordered ahead is refunded in full), or ``immediately`` with the refund rule
    (docs/subscriptions.md). Refused for a cancelled or expired subscription."""
    subs = load_subscriptions(store)
    sub = subs.get(subscription_id)
    if sub is None:
        raise NotFound(f"no subscription {subscription_id!r} (see: subscriptions list)")
    now = _instant(store, at)
    if sub.cancelled is not None:
        raise Conflict(
            f"subscription {subscription_id} was already cancelled ({sub.cancelled.mode}, "
            f"effective {sub.cancelled.effective_at.isoformat()})"
        )
    if sub.expired is not None or now >= sub.ends_at:
        raise Conflict(
            f"subscription {subscription_id} expired at {sub.ends_at.isoformat()}: "
            "nothing left to cancel"
        )
    running = sub.term_at(now)
    if running is None:  # not started yet: nothing ran, so it ends now
        immediately = True
    if immediately:
        refund = refund_for(
            sub.terms,
            sub.nodes,
            now,
            sub.scale,
            no_reason_available=_no_reason_available(subs, sub.workspace, now),
        )
        effective = now
    else:
        assert running is not None
        effective = running.ends_at
        refund = refund_for(
            sub.terms, sub.nodes, now, sub.scale, no_reason_available=False, from_term_end=effective
        )
    event = SubscriptionCancelled(
        subscription_id=subscription_id,
        mode="immediately" if immediately else "end-of-term",
        effective_at=effective,
        refund_minor=refund.amount_minor,
        no_reason=refund.no_reason,
        rule=refund.rule,
        reason=reason,
    )
    after = _after(sub, *_later_events(sub), event)
    if dry_run:
        return Cancellation(after, refund, dry_run=True)
    stream = subscription_stream(subscription_id)
    envelope = make_envelope(
        event,
        event_id=deterministic_id("event", "SubscriptionCancelled", subscription_id),
        stream=stream,
        occurred_at=now,
        observed_at=now,
        source=principal,
    )
    batch = [envelope]
    txn = refund_transaction(after, refund, now, str(envelope.event_id))
    if txn is not None:
        batch.append(transaction_envelope(txn, now, source=principal))
    store.append(batch, expected_versions={stream: store.stream_version(stream)})
    catch_up_all(store)
    return Cancellation(after, refund)


def subscription_row(sub: Subscription, at: datetime) -> dict[str, Any]:
    """One subscription as a flat row (CLI tables, CSV and the API), as of ``at``."""
    term = sub.term_at(at) or sub.last_term
    paid = sum(t.amount_minor for t in sub.terms)
    return {
        "subscription_id": sub.subscription_id,
        "group": sub.group,
        "spec": sub.spec,
        "nodes": sub.nodes,
        "workspace": sub.workspace,
        "term": term.unit,
        "status": sub.status(at),
        "auto_renew": sub.renews(),
        "starts_at": format_timestamp(sub.starts_at),
        "ends_at": format_timestamp(sub.ends_at),
        "terms": len(sub.terms),
        "unit_price": plain_decimal(term.unit_price),
        "paid_minor": paid,
        "refunded_minor": sub.cancelled.refund_minor if sub.cancelled else 0,
        "currency": sub.currency,
    }


def term_rows(sub: Subscription) -> list[dict[str, Any]]:
    """A subscription's terms, each with its locked price and what it cost."""
    return [
        {
            "term": t.term,
            "unit": t.unit,
            "starts_at": format_timestamp(t.starts_at),
            "ends_at": format_timestamp(t.ends_at),
            "ordered_at": format_timestamp(t.ordered_at),
            "book_id": t.book_id,
            "unit_price": plain_decimal(t.unit_price),
            "amount_minor": t.amount_minor,
            "currency": sub.currency,
        }
        for t in sub.terms
    ]
