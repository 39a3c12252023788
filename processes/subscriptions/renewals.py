"""A renewal, decided once: the next term of a subscription ordered at an instant, its
``SubscriptionRenewed`` and the charge the term's price makes.

The scheduler's automatic renewals (:mod:`.ticks`) and a renewal by hand
(``subscriptions renew``, ``POST /v1/subscriptions/{id}/renew``) both come here, so the two
build the same event, the same id (over the subscription and the term's number: a renewal
ordered twice is stored once) and the same charge.
"""

from __future__ import annotations

from datetime import datetime

from ledger.accounts import transaction_envelope
from ledger.envelopes import Envelope, make_envelope
from ledger.events import SubscriptionRenewed
from ledger.ids import deterministic_id
from ledger.periods import PeriodLocks
from ledger.subscriptions import SpecSchedule, Subscription, charge_transaction
from ledger.subscriptions.orders import next_term
from projections.subscriptions import subscription_stream

__all__ = ["renewal"]


def renewal(
    sub: Subscription,
    specs: SpecSchedule,
    at: datetime,
    *,
    automatic: bool,
    source: str,
    locks: PeriodLocks | None = None,
) -> tuple[list[Envelope], Subscription]:
    """The envelopes of ``sub``'s next term ordered at ``at`` (the renewal, and its charge
    when the term costs anything), and ``sub`` after it. An unknown spec price raises
    :class:`~ledger.errors.NotFound` (the scheduler records a failed attempt). ``locks``:
    a charge dated into a closed period is booked into the open one (:mod:`ledger.periods`)."""
    term = next_term(sub, specs, at)
    renewed = SubscriptionRenewed(
        subscription_id=sub.subscription_id, next=term, automatic=automatic
    )
    envelope = make_envelope(
        renewed,
        event_id=deterministic_id(
            "event", "SubscriptionRenewed", sub.subscription_id, str(term.term)
        ),
        stream=subscription_stream(sub.subscription_id),
        occurred_at=at,
        observed_at=at,
        source=source,
    )
    after = sub.after(renewed)
    charge = charge_transaction(after, term, str(envelope.event_id), locks=locks)
    batch = [envelope] + ([transaction_envelope(charge, at, source=source)] if charge else [])
    return batch, after
