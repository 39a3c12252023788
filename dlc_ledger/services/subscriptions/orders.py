"""Subscriptions as use cases: purchase, renew, cancel, and what they hold.

Each write decides on the subscriptions as stored (folded from the store at the head),
appends the subscription's event and its ledger transaction together on stream
``subscription/<id>`` (expecting the version it read, so two cancels cannot both
refund), then brings every read model to the head. Instants are cluster time: ``--at``,
else the wall clock or a replay's virtual one (:func:`billing_instant`).

A dry run decides exactly as the write does and builds the same envelopes (so every
bound of a new fact is checked, :func:`ledger.bounds.check_bounds`), then appends
nothing: it answers what the write would, a refusal included. The names a purchase
introduces are checked where they enter (:func:`ledger.bounds.check_name`), and its
paying workspace must be one the ledger knows unless ``known_only`` is off
(:func:`dlc_ledger.services.quotas.refuse_unknown_workspaces`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from dlc_ledger.services.clocks import billing_instant
from dlc_ledger.services.quotas import refuse_unknown_workspaces
from ledger.accounts import transaction_envelope
from ledger.bounds import MAX_LABEL_VALUE, MAX_NAME, check_free_text, check_name
from ledger.canonical import format_timestamp
from ledger.envelopes import Envelope, make_envelope
from ledger.errors import Conflict, Invalid, NotFound
from ledger.events import (
    SubscriptionCancelled,
    SubscriptionPricesPublished,
    SubscriptionPurchased,
    SubscriptionTerm,
    SubscriptionTermUnit,
)
from ledger.ids import deterministic_id
from ledger.money import plain_decimal
from ledger.store.base import EventStore, UnitOfWork
from ledger.subscriptions import (
    Refund,
    Subscription,
    charge_transaction,
    deferred_account,
    fold_subscriptions,
    refund_of,
    refund_transaction,
)
from ledger.subscriptions.orders import order_term
from processes.subscriptions import renewal
from projections.billing import period_locks
from projections.registry import catch_up_all
from projections.subscriptions import load_specs, load_subscriptions, subscription_stream

T = TypeVar("T")

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
        return at.astimezone(UTC)  # periods and calendar years are UTC's
    return billing_instant(store, None).at


_Decision = tuple[T, list[Envelope], dict[str, int]]


def _decide_and_append(store: EventStore, decide: Callable[[UnitOfWork], _Decision[T]]) -> T:
    """Run ``decide`` holding the store's append lock, then append what it decided in the
    same transaction: the subscriptions it reads stay the latest until the append commits,
    so a concurrent cancel, renewal, purchase or scheduler tick (each appending under the
    same lock) cannot slip in between. Then every read model to the head."""
    with store.transaction() as uow:
        uow.lock_appends()
        result, batch, expected = decide(uow)
        if batch:
            uow.append(batch, expected_versions=expected)
    if batch:
        catch_up_all(store)
    return result


def _booked_until(uow: UnitOfWork, sub: Subscription) -> datetime | None:
    """The end of the last day already recognised (or of a later event of ``sub``)."""
    days = uow.read_stream(f"account/{deferred_account(sub.subscription_id)}")
    events = uow.read_stream(subscription_stream(sub.subscription_id))
    instants = [r.envelope.occurred_at for r in [*days, *events]]
    return max(instants) if instants else None


def subscriptions(store: EventStore) -> list[Subscription]:
    """Every subscription, in order of start then id."""
    return sorted(
        load_subscriptions(store).values(), key=lambda s: (s.starts_at, s.subscription_id)
    )


def _version(uow: UnitOfWork, stream: str) -> int:
    return len(uow.read_stream(stream))  # versions are dense from 1


def find_subscription(store: EventStore | UnitOfWork, subscription_id: str) -> Subscription:
    sub = load_subscriptions(store).get(subscription_id)
    if sub is None:
        raise NotFound(f"no subscription {subscription_id!r} (see: subscriptions list)")
    return sub


def _purchase_of(sub: Subscription) -> SubscriptionPurchased:
    return SubscriptionPurchased(
        subscription_id=sub.subscription_id,
        group=sub.group,
        spec=sub.spec,
        nodes=sub.nodes_of(1),  # as purchased (changes since are events of their own)
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
    known_only: bool = False,
) -> Order:
    """Buy ``nodes`` nodes of ``spec`` into ``group`` for a ``term``, paid by ``workspace``.

    The id derives from ``key`` (an idempotency key: a repeat returns the existing one, a
    key reused for another purchase is refused) or, without one, from the purchase itself,
    so an identical purchase is refused rather than doubled: pass a ``key`` to buy twice.
    ``known_only``: ``workspace`` must be one the ledger knows (the CLI and the API ask
    for it unless told ``--allow-unknown-workspace``).
    """
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise Invalid(f"--nodes must be a whole number at least 1, got {nodes!r}")
    if key is not None and not key.strip():
        raise Invalid("--key must not be empty")
    check_name(group, "group", MAX_LABEL_VALUE)
    check_name(spec, "spec", MAX_NAME)
    check_name(workspace, "workspace", MAX_LABEL_VALUE)
    if key is not None:
        check_name(key, "key", MAX_NAME)
    if known_only:
        refuse_unknown_workspaces(
            store,
            [workspace],
            field="workspace",
            override=(
                "bind it in the quota tree first, or say so: --allow-unknown-workspace "
                "(API: allow_unknown_workspace)"
            ),
        )
    start = _instant(store, at)
    specs = load_specs(store)
    first = order_term(specs, spec, term, nodes, term=1, starts_at=start, ordered_at=start)
    section = specs.section_at(start)
    return _decide_and_append(
        store,
        lambda uow: _purchase(
            uow,
            group=group,
            spec=spec,
            nodes=nodes,
            workspace=workspace,
            principal=principal,
            auto_renew=auto_renew,
            key=key,
            dry_run=dry_run,
            start=start,
            first=first,
            section=section,
            start_given=at is not None,
        ),
    )


def _purchase(
    uow: UnitOfWork,
    *,
    group: str,
    spec: str,
    nodes: int,
    workspace: str,
    principal: str,
    auto_renew: bool,
    key: str | None,
    dry_run: bool,
    start: datetime,
    first: SubscriptionTerm,
    section: SubscriptionPricesPublished,
    start_given: bool = True,
) -> _Decision[Order]:
    term = first.unit
    current = load_subscriptions(uow)
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
        if not _same_order(existing, event, start_given):
            raise Conflict(
                f"idempotency key {key!r} was used for purchase {sub_id} "
                f"({existing.nodes} x {existing.spec} in {existing.group}); use a new key"
            )
        return Order(existing, created=False), [], {}
    sub = fold_subscriptions([event])[sub_id]
    envelope = make_envelope(
        event,
        event_id=deterministic_id("event", "SubscriptionPurchased", sub_id),
        stream=subscription_stream(sub_id),
        occurred_at=start,
        observed_at=start,
        source=principal,
    )
    # back-dated into a closed month: booked into the open one, naming its dates
    charge = charge_transaction(sub, first, str(envelope.event_id), locks=period_locks(uow))
    batch = [envelope] + ([transaction_envelope(charge, start, source=principal)] if charge else [])
    if dry_run:  # built, so checked as the write's: what it would answer, appended not
        return Order(sub, created=False, dry_run=True), [], {}
    return Order(sub, created=True), batch, {subscription_stream(sub_id): 0}


def _same_order(existing: Subscription, event: SubscriptionPurchased, start_given: bool) -> bool:
    """Whether a keyed repeat asks for ``existing``: compared on what the caller gave. A
    start the caller left out defaulted to *now*, which a retry cannot repeat, so it (and
    the term priced from it) is not compared then; auto-renew never was."""
    if start_given:
        return _purchase_of(existing).model_copy(update={"auto_renew": event.auto_renew}) == event
    given = (event.group, event.spec, event.nodes, event.first.unit, event.workspace)
    had = (
        existing.group,
        existing.spec,
        existing.nodes_of(1),
        existing.terms[0].unit,
        existing.workspace,
    )
    return given == had


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
    now = _instant(store, at)
    return _decide_and_append(
        store, lambda uow: _renew(uow, subscription_id, principal, now, dry_run)
    )


def _renew(
    uow: UnitOfWork, subscription_id: str, principal: str, now: datetime, dry_run: bool
) -> _Decision[Order]:
    sub = find_subscription(uow, subscription_id)
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
    batch, after = renewal(
        sub, load_specs(uow), now, automatic=False, source=principal, locks=period_locks(uow)
    )
    stream = subscription_stream(subscription_id)
    if dry_run:
        return Order(after, created=False, dry_run=True), [], {}
    return Order(after, created=True), batch, {stream: _version(uow, stream)}


def _no_reason_available(subs: dict[str, Subscription], workspace: str, at: datetime) -> bool:
    return not any(
        s.cancelled is not None
        and s.cancelled.no_reason
        and s.workspace == workspace
        and s.cancelled.effective_at.astimezone(UTC).year == at.astimezone(UTC).year
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
    (docs/subscriptions.md). Refused for a cancelled or expired subscription, and for an
    instant before what its books already hold (a day recognised, a term ordered)."""
    check_free_text(reason, "reason")
    now = _instant(store, at)
    return _decide_and_append(
        store,
        lambda uow: _cancel(uow, subscription_id, principal, now, immediately, reason, dry_run),
    )


def _cancel(
    uow: UnitOfWork,
    subscription_id: str,
    principal: str,
    now: datetime,
    immediately: bool,
    reason: str,
    dry_run: bool,
) -> _Decision[Cancellation]:
    subs = load_subscriptions(uow)
    sub = subs.get(subscription_id)
    if sub is None:
        raise NotFound(f"no subscription {subscription_id!r} (see: subscriptions list)")
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
    if now < sub.starts_at:
        # not started yet (a purchase with a future start): its order is booked at its
        # start, so the cancellation is too, refunding every term in full (nothing was
        # consumed) and ending it there, so its capacity never appears and the charge
        # and the refund net to zero in the same period
        now, immediately = sub.starts_at, True
    booked = _booked_until(uow, sub)
    if booked is not None and now < booked:
        raise Conflict(
            f"cannot cancel subscription {subscription_id} at {now.isoformat()}: its books "
            f"already hold {booked.isoformat()} (a day recognised or a term ordered); cancel "
            "at or after it"
        )
    running = sub.term_at(now)
    if running is None:  # not started yet: nothing ran, so it ends now
        immediately = True
    if immediately:
        refund = refund_of(
            sub, now, no_reason_available=_no_reason_available(subs, sub.workspace, now)
        )
        effective = now
    else:
        assert running is not None
        effective = running.ends_at
        refund = refund_of(sub, now, no_reason_available=False, from_term_end=effective)
    event = SubscriptionCancelled(
        subscription_id=subscription_id,
        mode="immediately" if immediately else "end-of-term",
        effective_at=effective,
        refund_minor=refund.amount_minor,
        no_reason=refund.no_reason,
        rule=refund.rule,
        reason=reason,
    )
    after = sub.after(event)
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
    txn = refund_transaction(after, refund, now, str(envelope.event_id), locks=period_locks(uow))
    if txn is not None:
        batch.append(transaction_envelope(txn, now, source=principal))
    if dry_run:
        return Cancellation(after, refund, dry_run=True), [], {}
    return Cancellation(after, refund), batch, {stream: _version(uow, stream)}


def subscription_row(sub: Subscription, at: datetime) -> dict[str, Any]:
    """One subscription as a flat row (CLI tables, CSV and the API), as of ``at``."""
    term = sub.term_at(at) or sub.last_term
    paid = sum(part.amount_minor for part, _, _ in sub.parts())  # nodes added too
    return {
        "subscription_id": sub.subscription_id,
        "group": sub.group,
        "spec": sub.spec,
        "nodes": sub.nodes_at(at) or sub.nodes,  # changes count from their instant
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


def term_rows(
    sub: Subscription, credits: Mapping[int, Mapping[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """A subscription's terms, each with its locked price and what it cost; with
    ``credits`` (:func:`~dlc_ledger.services.subscriptions.term_credits`), each term's SLA
    credit too: status, undelivered node-hours and amount."""
    return [
        {
            "term": t.term,
            "unit": t.unit,
            "nodes": sub.nodes_of(t.term),
            "starts_at": format_timestamp(t.starts_at),
            "ends_at": format_timestamp(t.ends_at),
            "ordered_at": format_timestamp(t.ordered_at),
            "book_id": t.book_id,
            "unit_price": plain_decimal(t.unit_price),
            "amount_minor": t.amount_minor,
            **(credits.get(t.term, {}) if credits is not None else {}),
            "currency": sub.currency,
        }
        for t in sub.terms
    ]
