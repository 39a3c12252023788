"""Budgets per workspace and period: the pure rules behind ``dlc-ledger budgets``.

A budget caps what a workspace is charged per period (a calendar month in UTC, as
invoices are). Everything here is plain data in and out, no IO: the budget file's
validation and its diff into events, the period bounds, when posted cost crosses a
budget (money in integer minor units, DESIGN §5), the deterministic ids that make a
crossing stored once, and which jobs a ``stop`` budget suspends (pay-as-you-go only,
never subscription-quota jobs). ``docs/billing.md`` ("Budgets") states the rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any, get_args
from uuid import UUID

from ledger.bounds import MAX_LABEL_VALUE
from ledger.errors import Invalid
from ledger.events import BudgetAction, BudgetPeriod, BudgetRemoved, BudgetSet
from ledger.ids import deterministic_id
from ledger.money import MAX_SCALE, PRECISE_DIGITS, from_minor, round_precise
from ledger.rating import BillingPeriod, calendar_months

__all__ = [
    "ACTIONS",
    "MAX_BUDGET_MINOR",
    "PAY_AS_YOU_GO",
    "PERIODS",
    "STOPPABLE_STATUSES",
    "Budget",
    "BudgetFileError",
    "Crossing",
    "JobToStop",
    "budget_stream",
    "budgets_from_document",
    "diff_budgets",
    "exceeded_event_id",
    "exceeding_precise",
    "is_exceeded",
    "is_exhausted",
    "notification_id",
    "period_of",
    "rescale",
    "stops",
]

ACTIONS: tuple[str, ...] = get_args(BudgetAction)
PERIODS: tuple[str, ...] = get_args(BudgetPeriod)
#: Billing modes charged per use: a ``stop`` budget suspends their jobs. ``quota``
#: (subscription) jobs are prepaid and never stopped by a budget.
PAY_AS_YOU_GO = frozenset({"public", "spot", "idle"})
#: Job statuses (projections/jobs/fold.py) in which a job holds, or is about to hold,
#: resources: the ones a ``stop`` budget suspends.
STOPPABLE_STATUSES = frozenset({"Admitted", "Running", "Restarting"})
#: Largest budget, in minor units: a PostgreSQL bigint with room to spare.
MAX_BUDGET_MINOR = 10**15

_PRECISE: int = 10**PRECISE_DIGITS
# fullmatch, never match: ``$`` also matches before a trailing newline ("ws-a\n")
_WORKSPACE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")
_CURRENCY = re.compile(r"[A-Z]{3}")
_FIELDS = frozenset({"workspace", "amount", "currency", "period", "action"})


class BudgetFileError(Invalid):
    """A budget document that cannot be applied; the message names every bad entry and field."""


@dataclass(frozen=True)
class Budget:
    """One workspace's budget: ``amount_minor`` minor units of ``currency`` at ``scale``."""

    workspace: str
    amount_minor: int
    currency: str
    scale: int
    period: BudgetPeriod = "month"
    action: BudgetAction = "notify"

    @property
    def amount(self) -> Decimal:
        return from_minor(self.amount_minor, self.scale)

    def to_event(self) -> BudgetSet:
        return BudgetSet(
            workspace=self.workspace,
            amount_minor=self.amount_minor,
            currency=self.currency,
            scale=self.scale,
            period=self.period,
            action=self.action,
        )

    @classmethod
    def from_event(cls, event: BudgetSet) -> Budget:
        return cls(
            event.workspace,
            event.amount_minor,
            event.currency,
            event.scale,
            event.period,
            event.action,
        )


# --- the file -------------------------------------------------------------------------


def _amount(value: Any) -> Decimal:
    """A decimal from a YAML string or number (a float as written: ``1000.5``)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise Invalid(f"must be a decimal number or string, got {value!r}")
    text = repr(value) if isinstance(value, float) else str(value).strip()
    try:
        amount = Decimal(text)
    except InvalidOperation:
        raise Invalid(f"{value!r} is not a decimal number") from None
    if not amount.is_finite():
        raise Invalid(f"{value!r} is not finite")
    if amount < 0:
        raise Invalid(f"{value!r} is negative")
    return amount


def _entry(
    index: int, entry: Any, scale_of: Callable[[str], int], billing_currency: str | None
) -> tuple[Budget | None, list[str]]:
    where = f"budget #{index + 1}"
    if not isinstance(entry, dict):
        return None, [f"{where}: an entry is a mapping (workspace, amount, currency, ...)"]
    workspace = entry.get("workspace")
    if isinstance(workspace, str) and workspace:
        where = f"{where} (workspace {workspace})"
    errors = [f"{where}: unknown field {k!r}" for k in sorted(set(entry) - _FIELDS, key=str)]
    missing = [k for k in ("workspace", "amount", "currency") if entry.get(k) is None]
    errors += [f"{where}: {k}: required" for k in missing]
    if workspace is not None and (
        not isinstance(workspace, str)
        or len(workspace) > MAX_LABEL_VALUE
        or not _WORKSPACE.fullmatch(workspace)
    ):
        errors.append(
            f"{where}: workspace: {workspace!r} is not a workspace name (letters, digits, "
            f"'-', '_' or '.', at most {MAX_LABEL_VALUE})"
        )
    currency = entry.get("currency")
    if currency is not None and (
        not isinstance(currency, str) or not _CURRENCY.fullmatch(currency)
    ):
        errors.append(f"{where}: currency: {currency!r} is not an ISO 4217 code (e.g. USD)")
        currency = None
    elif currency is not None and billing_currency is not None and currency != billing_currency:
        errors.append(
            f"{where}: currency: {currency}, but the price book bills in {billing_currency}: "
            "the budget could never be compared with what is posted"
        )
        currency = None
    period = entry.get("period", "month")
    if period not in PERIODS:
        errors.append(f"{where}: period: {period!r} is not one of {', '.join(PERIODS)}")
    action = entry.get("action", "notify")
    if action not in ACTIONS:
        errors.append(f"{where}: action: {action!r} is not one of {', '.join(ACTIONS)}")
    amount_minor = None
    if entry.get("amount") is not None:
        try:
            amount = _amount(entry["amount"])
        except ValueError as exc:
            errors.append(f"{where}: amount: {exc}")
        else:
            if currency is not None:
                scale = scale_of(currency)
                minor = Fraction(amount) * 10**scale
                if minor.denominator != 1:
                    errors.append(
                        f"{where}: amount: {entry['amount']!r} has more decimals than "
                        f"{currency} is billed in ({scale})"
                    )
                elif minor > MAX_BUDGET_MINOR:
                    errors.append(f"{where}: amount: {entry['amount']!r} is too large")
                else:
                    amount_minor = int(minor)
    if errors or amount_minor is None or currency is None:
        return None, errors
    assert isinstance(workspace, str)
    return Budget(workspace, amount_minor, currency, scale_of(currency), period, action), []


def budgets_from_document(
    raw: Any, scale_of: Callable[[str], int], billing_currency: str | None = None
) -> dict[str, Budget]:
    """The budgets of a parsed file (``{budgets: [...]}`` or the list itself), by workspace.

    ``scale_of(currency)`` is the scale the currency is billed at (the price book's, else
    ISO 4217's): an amount must be exact in it. ``billing_currency`` (the price book's,
    when one is published) is the only currency a budget may name. Every problem is
    reported at once, each naming its entry and field, in one :class:`BudgetFileError`.
    """
    if isinstance(raw, dict):
        unknown = sorted(set(raw) - {"budgets"}, key=str)
        if unknown:
            raise BudgetFileError(f"unknown top-level field(s) {unknown}; expected 'budgets'")
        raw = raw.get("budgets")
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise BudgetFileError("a budget file is a list of budgets (or {budgets: [...]})")
    out: dict[str, Budget] = {}
    errors: list[str] = []
    first: dict[str, int] = {}
    for index, entry in enumerate(raw):
        budget, problems = _entry(index, entry, scale_of, billing_currency)
        errors += problems
        if budget is None:
            continue
        if budget.workspace in first:
            errors.append(
                f"budget #{index + 1} (workspace {budget.workspace}): a second budget for the "
                f"workspace (first: #{first[budget.workspace] + 1}); one per workspace"
            )
            continue
        first[budget.workspace] = index
        out[budget.workspace] = budget
    if errors:
        raise BudgetFileError("; ".join(errors))
    return out


def diff_budgets(
    current: Mapping[str, Budget], desired: Mapping[str, Budget]
) -> list[BudgetSet | BudgetRemoved]:
    """The events that turn ``current`` into ``desired``: a ``BudgetSet`` per new or
    changed budget, a ``BudgetRemoved`` per workspace the file no longer lists. Equal
    inputs give no events (applying a file twice stores nothing the second time)."""
    events: list[BudgetSet | BudgetRemoved] = []
    for workspace in sorted(desired):
        if current.get(workspace) != desired[workspace]:
            events.append(desired[workspace].to_event())
    events += [BudgetRemoved(workspace=w) for w in sorted(set(current) - set(desired))]
    return events


def budget_stream(workspace: str) -> str:
    """The stream a workspace's budget facts live in."""
    return f"budget/{workspace}"


# --- periods and money ----------------------------------------------------------------

_MONTHS = calendar_months()


def period_of(period: BudgetPeriod, at: datetime) -> BillingPeriod:
    """The period containing ``at``: a calendar month in UTC, like invoices (``[start, end)``)."""
    if period != "month":
        raise Invalid(f"unknown budget period {period!r}")
    return _MONTHS(at)


def rescale(minor: int, scale: int, to_scale: int) -> int:
    """``minor`` units at ``scale`` in units at ``to_scale``, half-even (the price book's
    scale may differ from the one a budget was applied at)."""
    if not 0 <= to_scale <= MAX_SCALE:
        raise Invalid(f"scale must be in 0..{MAX_SCALE}, got {to_scale}")
    rounded: int = round(Fraction(minor) * Fraction(10) ** (to_scale - scale))
    return rounded


def is_exceeded(budget_minor: int, spent_precise: int) -> bool:
    """Whether spent (precise: 10**-9 minor units, as posted) exceeds the budget: money is
    owed in whole minor units, so the spent amount rounded half-even must be above it."""
    return round_precise(spent_precise) > budget_minor


def exceeding_precise(budget_minor: int) -> int:
    """The least precise amount that :func:`is_exceeded` the budget (what a running sum is
    compared with to find the instant of crossing): ``budget + 0.5`` rounds up (to even)
    only when ``budget`` is odd."""
    half = budget_minor * _PRECISE + _PRECISE // 2
    return half if budget_minor % 2 else half + 1


def exceeded_event_id(workspace: str, period: str, budget_event_id: UUID | str) -> UUID:
    """The id of the one ``BudgetExceeded`` of a budget (its ``BudgetSet``) in a period."""
    return deterministic_id("budget-exceeded", workspace, period, str(budget_event_id))


def notification_id(exceeded_id: UUID | str) -> str:
    """The id of the notification queued for a crossing."""
    return str(deterministic_id("notification", "budget-exceeded", str(exceeded_id)))


# --- stopping ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Crossing:
    """A stored ``BudgetExceeded``, as far as exhaustion needs it."""

    budget_event_id: str
    period: str
    at: datetime


def is_exhausted(
    budget: Budget, budget_event_id: str, crossings: Iterable[Crossing], at: datetime
) -> bool:
    """Whether a workspace's budget stops its work at ``at``: a ``stop`` budget crossed in
    the period containing ``at``, by then, and still the budget in force (a new
    ``BudgetSet``, e.g. a raised amount, must be crossed on its own; the next period
    starts afresh)."""
    if budget.action != "stop":
        return False
    key = period_of(budget.period, at).key
    return any(
        c.budget_event_id == budget_event_id and c.period == key and c.at <= at for c in crossings
    )


def stops(billing_mode: str | None, status: str) -> bool:
    """Whether a ``stop`` budget suspends a job in ``status``: pay-as-you-go jobs that hold
    (or are about to hold) resources. Subscription (``quota``) jobs never, nor jobs whose
    billing mode is unknown."""
    return billing_mode in PAY_AS_YOU_GO and status in STOPPABLE_STATUSES


@dataclass(frozen=True)
class JobToStop:
    """A job the dispatcher suspends for its workspace's exhausted budget: its identity
    on the cluster (namespace, name, kind) and why."""

    job_uid: str
    namespace: str
    name: str
    kind: str
    workspace: str
    billing_mode: str
    status: str
