"""The budgets seam: an exhausted workspace's jobs stay pending (BudgetExhausted) and its
running pay-as-you-go jobs are suspended; a subscription (quota-mode) job never is."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection

from tests.support.live import Live


class Gate:
    """What the budgets would say: ``ws-b`` is out of budget, these jobs must stop."""

    def __init__(self) -> None:
        self.exhausted: frozenset[str] = frozenset()
        self.stop: list[str] = []

    def exhausted_workspaces(self, conn: Connection, at: datetime) -> frozenset[str]:
        return self.exhausted

    def jobs_to_stop(self, conn: Connection, at: datetime) -> Sequence[str]:
        return self.stop


def test_an_exhausted_workspace_admits_nothing_and_stops_pay_as_you_go(live: Live) -> None:
    gate = Gate()
    live.dispatcher = live.new_dispatcher(budgets=gate)
    paid = live.submit("paid", "ws-b", 1)
    prepaid = live.submit("prepaid", "ws-b", 1, billing="quota")
    assert set(live.dispatcher.cycle().admitted) == {paid, prepaid}
    live.sim.advance(5)
    live.dispatcher.cycle()

    gate.exhausted = frozenset({"ws-b"})
    gate.stop = [paid, prepaid]
    late = live.submit("late", "ws-b", 1)
    live.sim.advance(1)
    stopping = live.dispatcher.cycle()
    assert stopping.admitted == () and stopping.budget_stopped == (paid,)
    assert [(s.job, s.reason) for s in stopping.result.pending] == [(late, "BudgetExhausted")]
    assert live.suspended("paid") and not live.suspended("prepaid") and live.suspended("late")
