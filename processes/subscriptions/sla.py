"""The subscriptions' SLA credits, booked by the billing tick (docs/subscriptions.md).

A term whose spec's book states a delivery commitment (``sla: {grace_minutes: N}``) is
assessed once its service has ended and the grace has passed after it (by then every
undelivered interval that touches the term is known to last the grace or not): one
``SlaCreditIssued`` on ``subscription/<id>``, stamped at that instant, and, when the
credit is not zero, its transaction (debit ``revenue/sla-credits/<spec>``, credit
``receivable/<workspace>``, a credit line on the workspace's invoice of the month).
A term delivered in full gets its ``SlaCreditIssued`` of 0 too: the record that it was
assessed, so later ticks neither read the node facts again nor credit it twice.

Ids derive from (subscription, term): a re-run, a replay ticking once at its end, or a
concurrent tick books nothing twice. The node facts are those the watcher recorded by
the tick (a fact arriving after a term was assessed does not change its credit).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import orjson

from ledger.accounts import balanced_transaction, receivable_account, transaction_envelope
from ledger.catalogue import decode
from ledger.envelopes import Envelope, make_envelope
from ledger.events import (
    NodeDowntime,
    Posting,
    SlaCreditIssued,
    SubscriptionCharge,
    SubscriptionTerm,
)
from ledger.events.subscriptions import MAX_SLA_NODES_NAMED
from ledger.ids import deterministic_id
from ledger.periods import PeriodLocks, book_into_open
from ledger.store.base import EventStore, UnitOfWork, read_all_of_types
from ledger.store.failures import is_poison
from ledger.subscriptions import SpecSchedule, Subscription
from ledger.subscriptions.sla import (
    NODE_FACT_TYPES,
    TermDelivery,
    credit_minor,
    node_states,
    term_deliveries,
    us,
)
from projections.subscriptions import subscription_stream

__all__ = [
    "POISON_REASON",
    "SLA_CREDITS",
    "assessed_terms",
    "due_terms",
    "load_deliveries",
    "sla_credit_account",
    "sla_credits",
]

SLA_CREDITS = "revenue/sla-credits"
#: The reason of a dead letter for a term whose SLA credit cannot be built.
POISON_REASON = "tick-failed"  # as the rest of the subscriptions tick (docs/store.md)
_SECOND = Decimal("0.000001")
_CENT = Decimal("0.01")
_HOUR_US = 3_600_000_000


def sla_credit_account(spec: str) -> str:
    """The contra-revenue account of a spec's SLA credits."""
    return f"{SLA_CREDITS}/{spec}"


def _period(t: datetime) -> str:
    t = t.astimezone(UTC)
    return f"{t.year:04d}-{t.month:02d}"


def assessed_terms(source: EventStore | UnitOfWork) -> dict[tuple[str, int], SlaCreditIssued]:
    """The SLA credits booked, by (subscription, term)."""
    out: dict[tuple[str, int], SlaCreditIssued] = {}
    for record in read_all_of_types(source, ("SlaCreditIssued",)):
        data = decode(record.envelope)
        assert isinstance(data, SlaCreditIssued)
        out[(data.subscription_id, data.term)] = data
    return out


def _settles(sub: Subscription, term: SubscriptionTerm, grace: int) -> datetime:
    return min(term.ends_at, sub.ends_at) + timedelta(minutes=grace)


def due_terms(
    subs: Iterable[Subscription],
    specs: SpecSchedule,
    assessed: set[tuple[str, int]] | dict[tuple[str, int], SlaCreditIssued],
    now: datetime,
) -> list[tuple[Subscription, SubscriptionTerm, datetime]]:
    """The terms with a commitment whose service ended a grace ago by ``now``, not yet
    assessed, with the instant each settles."""
    out = []
    for sub in subs:
        for term in sub.terms:
            if (sub.subscription_id, term.term) in assessed:
                continue
            if term.starts_at >= min(term.ends_at, sub.ends_at):
                continue  # never served (a renewal refunded before it started)
            sla = specs.sla_of(sub.spec, term.book_id, term.ordered_at)
            if sla is None:
                continue
            settles = _settles(sub, term, sla.grace_minutes)
            if settles <= now:
                out.append((sub, term, settles))
    return out


def load_deliveries(
    source: EventStore | UnitOfWork,
    subs: Iterable[Subscription],
    specs: SpecSchedule,
    until: datetime,
) -> list[TermDelivery]:
    """Every term's delivery up to ``until`` from the node facts in the store."""
    facts = [
        (r.envelope.occurred_at, decode(r.envelope))
        for r in read_all_of_types(source, NODE_FACT_TYPES)
    ]
    return term_deliveries(subs, node_states(facts), specs, until)


def _hours(node_us: int) -> Decimal:
    return (Decimal(node_us) / _HOUR_US).quantize(_SECOND)


def _named(delivery: TermDelivery) -> tuple[tuple[NodeDowntime, ...], int]:
    ranked = sorted(delivery.down_nodes.items(), key=lambda kv: (-kv[1], kv[0]))
    named = tuple(
        NodeDowntime(node=node, state=state, seconds=Decimal(span) / 1_000_000)
        for (node, state), span in ranked[:MAX_SLA_NODES_NAMED]
    )
    return named, max(0, len(ranked) - MAX_SLA_NODES_NAMED)


def _credit(
    sub: Subscription,
    delivery: TermDelivery,
    settles: datetime,
    source: str,
    locks: PeriodLocks | None = None,
) -> list[Envelope]:
    term = delivery.term
    amount = credit_minor(sub, delivery)
    named, more = _named(delivery)
    hours = _hours(delivery.undelivered_us)
    txn_id = str(deterministic_id("txn-subscription", sub.subscription_id, str(term.term), "sla"))
    # settled in a locked month: booked into the open one (ledger.periods), credit and txn
    period = _period(settles)
    if locks is not None:
        period = locks.posting_period(sub.workspace, period)
    nodes_text = ", ".join(
        f"{d.node} {(d.seconds / 3600).quantize(_CENT)} h {d.state}" for d in named[:5]
    )
    if len(named) > 5 or more:
        nodes_text += f", +{len(named) - 5 + more if len(named) > 5 else more} more"
    credit = SlaCreditIssued(
        subscription_id=sub.subscription_id,
        term=term.term,
        workspace=sub.workspace,
        group=sub.group,
        spec=sub.spec,
        nodes=sub.nodes_of(term.term),
        starts_at=term.starts_at,
        ends_at=delivery.ends_at,
        term_seconds=us(term.ends_at - term.starts_at) // 1_000_000 or 1,
        unit_price=term.unit_price,
        grace_minutes=delivery.grace_minutes or 0,
        subscribed_node_seconds=Decimal(delivery.subscribed_us) / 1_000_000,
        undelivered_node_seconds=Decimal(delivery.undelivered_us) / 1_000_000,
        amount_minor=amount,
        currency=sub.currency,
        transaction_id=txn_id if amount else None,
        period=period,
        down_nodes=named,
        more_down_nodes=more,
    )
    event_id = deterministic_id("event", "SlaCreditIssued", sub.subscription_id, str(term.term))
    out = [
        make_envelope(
            credit,
            event_id=event_id,
            stream=subscription_stream(sub.subscription_id),
            occurred_at=settles,
            observed_at=settles,
            source=source,
        )
    ]
    if amount:
        txn = balanced_transaction(
            txn_id,
            [
                Posting(
                    account=sla_credit_account(sub.spec),
                    amount_minor=amount,
                    currency=sub.currency,
                ),
                Posting(
                    account=receivable_account(sub.workspace),
                    amount_minor=-amount,
                    currency=sub.currency,
                ),
            ],
            cause_event_ids=(str(event_id),),
            period=_period(settles),
            memo=(
                f"SLA credit: subscription {sub.subscription_id} term {term.term}, "
                f"{hours.quantize(_CENT)} "
                f"node-hours of {sub.group} not delivered beyond the {credit.grace_minutes}-"
                f"minute grace" + (f" ({nodes_text})" if nodes_text else "")
            ),
            charge=SubscriptionCharge(
                subscription_id=sub.subscription_id,
                term=term.term,
                kind="sla-credit",
                workspace=sub.workspace,
                group=sub.group,
                spec=sub.spec,
                nodes=sub.nodes_of(term.term),
                unit=term.unit,
                unit_price=term.unit_price,
                starts_at=term.starts_at,
                ends_at=delivery.ends_at,
                detail=nodes_text,
                node_hours=hours,
            ),
        )
        if locks is not None:  # the same rule as the credit's period above
            txn = book_into_open(txn, locks, service=f"{term.starts_at:%Y-%m-%d} to "
                                 f"{delivery.ends_at:%Y-%m-%d}")  # fmt: skip
        out.append(transaction_envelope(txn, settles, source=source))
    return out


def sla_credits(
    uow: UnitOfWork,
    subs: dict[str, Subscription],
    specs: SpecSchedule,
    now: datetime,
    *,
    source: str,
    locks: PeriodLocks | None = None,
) -> list[Envelope]:
    """The SLA credits due by ``now`` not booked yet (the node facts are read only when
    some term is due); ``locks``: one settled in a closed month is booked into the open one."""
    due = due_terms(subs.values(), specs, assessed_terms(uow), now)
    if not due:
        return []
    groups = {sub.group for sub, _, _ in due}
    in_groups = [s for s in subs.values() if s.group in groups]
    deliveries = {
        (d.subscription_id, d.term.term): d for d in load_deliveries(uow, in_groups, specs, now)
    }
    out: list[Envelope] = []
    for sub, term, settles in due:
        delivery = deliveries.get((sub.subscription_id, term.term))
        if delivery is None:
            continue
        try:
            out.extend(_credit(sub, delivery, settles, source, locks))
        except Exception as exc:
            if not is_poison(exc):
                raise
            # one term's credit that cannot be built (a value past its bounds) is set
            # aside, as a renewal that cannot be is; the others are booked
            uow.record_dead_letter(
                source=source,
                reason=POISON_REASON,
                error=f"subscription {sub.subscription_id} term {term.term}: "
                f"{type(exc).__name__}: {exc}",
                payload=orjson.dumps({"subscription_id": sub.subscription_id, "term": term.term}),
            )
    return out
