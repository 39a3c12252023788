"""Capacity follows subscriptions into the live loop: once a quota's groups have no
subscribed capacity, nothing of it is admitted (SubscriptionExpired, as ``jobs why``
says), and after the 24-hour grace its running jobs are stopped."""

from __future__ import annotations

from datetime import timedelta

from dlc_ledger.services.billing import publish_price_book
from dlc_ledger.services.dispatch import why_job
from dlc_ledger.services.quotas import draw_on_groups
from dlc_ledger.services.subscriptions import purchase
from tests.support.billing import demo_book
from tests.support.live import Live


def test_expiry_blocks_admission_then_stops_after_the_grace(live: Live) -> None:
    now = live.sim.clock.now()
    publish_price_book(live.store, demo_book(), at=now)
    order = purchase(
        live.store, group="gpu-g2", spec="ml.g2.8xlarge", nodes=1, term="month",
        workspace="ws-a", principal="test", at=now,
    )  # fmt: skip
    draw_on_groups(live.store, {"root": ["gpu-g2"]}, principal="test", at=now)
    running = live.submit("running", "ws-a", 1, billing="quota")
    assert live.dispatcher.cycle().admitted == (running,)

    end = order.subscription.ends_at
    live.sim.advance((end - now).total_seconds() + 3600)  # an hour after expiry
    late = live.submit("late", "ws-a", 1, billing="quota")
    expired = live.dispatcher.cycle()
    assert expired.admitted == () and expired.released_stopped == ()  # still in its grace
    assert [(s.job, s.reason) for s in expired.result.pending] == [(late, "SubscriptionExpired")]
    doc = why_job(live.store, late)
    assert "no subscribed capacity" in str(doc), doc
    assert not live.suspended("running")

    live.sim.advance(timedelta(hours=24).total_seconds())  # past the grace: released
    released = live.dispatcher.cycle()
    assert released.released_stopped == (running,)
    assert live.suspended("running") and live.suspended("late")
