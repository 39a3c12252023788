"""Period locks: the one rule for where a posting dated into a closed month is booked.

A finance team closes a month once it has invoiced it; from then on nothing may change
that month's books (its invoices, its journal, its cost report). Yet facts keep arriving
dated into it: a back-dated subscription purchase, a refund, the recognition of a day, a
late usage rating. Each is booked into the **earliest open period** after its own, as an
adjustment that names the period (and service dates) it belongs to, so it reaches that
period's invoice instead of sitting on a receivable no invoice will ever show.

A period is locked for a workspace when

- the workspace has an issued (not voided) invoice for it, or
- the period is closed for every workspace (``PeriodClosed``: ``billing close --period
  P``, or the billing tick once the period's end + grace has passed), unless the
  workspace's invoice for it was voided and awaits its re-issue (a void reopens the
  period for that workspace: what is posted meanwhile goes on the revision).

Rating (:mod:`processes.billing.rater`), the subscriptions' charges, renewals, refunds and
recognitions (:mod:`processes.subscriptions.ticks`, ``dlc_ledger.services.subscriptions``)
all book through :func:`book_into_open`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ledger.events import LedgerTransactionPosted
from ledger.rating import PeriodFn, calendar_months, next_period

__all__ = ["PERIODS_STREAM", "PeriodLocks", "book_into_open"]

#: The stream of every ``PeriodClosed`` (a handful a year: read whole).
PERIODS_STREAM = "period/closes"


@dataclass(frozen=True)
class PeriodLocks:
    """Which periods are locked, for whom (see the module's rule)."""

    closed: frozenset[str] = frozenset()  # closed for every workspace (PeriodClosed)
    invoiced: frozenset[tuple[str, str]] = frozenset()  # (workspace, period) issued
    reopened: frozenset[tuple[str, str]] = frozenset()  # voided, not re-issued yet
    periods: PeriodFn = field(default_factory=calendar_months)

    @classmethod
    def of(
        cls,
        closed: Iterable[str],
        invoices: Iterable[tuple[str, str, str]],
        periods: PeriodFn | None = None,
    ) -> PeriodLocks:
        """From the closed periods and every invoice's (workspace, period, status)."""
        issued: set[tuple[str, str]] = set()
        voided: set[tuple[str, str]] = set()
        for workspace, period, status in invoices:
            (issued if status == "issued" else voided).add((workspace, period))
        return cls(
            frozenset(closed),
            frozenset(issued),
            frozenset(voided - issued),
            periods or calendar_months(),
        )

    def locked(self, workspace: str | None, period: str) -> bool:
        if workspace is not None and (workspace, period) in self.invoiced:
            return True
        if period in self.closed:
            return workspace is None or (workspace, period) not in self.reopened
        return False

    def posting_period(self, workspace: str | None, period: str) -> str:
        """``period`` if it is open for ``workspace``, else the earliest open one after it
        (``workspace`` None: a posting of no workspace, e.g. a day's recognition)."""
        while self.locked(workspace, period):
            period = next_period(period, self.periods)
        return period


def _workspace(txn: LedgerTransactionPosted) -> str | None:
    if txn.usage is not None:
        return txn.usage.workspace
    if txn.charge is not None:
        return txn.charge.workspace
    receivable = [p.account for p in txn.postings if p.account.startswith("receivable/")]
    return receivable[0].removeprefix("receivable/") if receivable else None


def book_into_open(
    txn: LedgerTransactionPosted, locks: PeriodLocks, *, service: str = ""
) -> LedgerTransactionPosted:
    """``txn`` as it is when its period is open; else moved to the earliest open period,
    its ``service_period`` the one it belongs to and its memo saying so (``service``: the
    dates it covers, named in the memo, e.g. ``2027-10-20 to 2027-11-20``)."""
    if txn.period is None:
        return txn
    posting = locks.posting_period(_workspace(txn), txn.period)
    if posting == txn.period:
        return txn
    dates = f" ({service})" if service else ""
    return txn.model_copy(
        update={
            "period": posting,
            "service_period": txn.period,
            "memo": f"late adjustment for locked period {txn.period}{dates} posted to "
            f"{posting}: {txn.memo}",
        }
    )
