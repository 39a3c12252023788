"""The pure budget rules, from plain data: the file, the diff, crossing, periods, who stops."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.budgets import (
    Budget,
    BudgetFileError,
    Crossing,
    budgets_from_document,
    diff_budgets,
    exceeded_event_id,
    exceeding_precise,
    is_exceeded,
    is_exhausted,
    period_of,
    rescale,
    stops,
)
from ledger.events import BudgetRemoved, BudgetSet


def _scale(currency: str) -> int:
    return {"JPY": 0}.get(currency, 2)


def _doc(*entries: dict[str, object]) -> dict[str, object]:
    return {"budgets": list(entries)}


def test_a_document_gives_budgets_in_minor_units() -> None:
    found = budgets_from_document(
        _doc(
            {"workspace": "ws-a", "amount": "1000.50", "currency": "USD", "action": "stop"},
            {"workspace": "ws-b", "amount": 250, "currency": "USD"},
            {"workspace": "ws-c", "amount": 12.5, "currency": "USD", "period": "month"},
            {"workspace": "ws-j", "amount": "5000", "currency": "JPY"},
        ),
        _scale,
    )
    assert found["ws-a"] == Budget("ws-a", 100050, "USD", 2, "month", "stop")
    assert found["ws-b"] == Budget("ws-b", 25000, "USD", 2, "month", "notify")
    assert found["ws-c"].amount_minor == 1250
    assert found["ws-j"] == Budget("ws-j", 5000, "JPY", 0)
    assert budgets_from_document({"budgets": []}, _scale) == {}
    assert budgets_from_document([], _scale) == {}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"amount": "1", "currency": "USD"}, "budget #1: workspace: required"),
        ({"workspace": "ws-a", "currency": "USD"}, "budget #1 (workspace ws-a): amount: required"),
        (
            {"workspace": "ws-a", "amount": "-5", "currency": "USD"},
            "budget #1 (workspace ws-a): amount: '-5' is negative",
        ),
        (
            {"workspace": "ws-a", "amount": "ten", "currency": "USD"},
            "amount: 'ten' is not a decimal number",
        ),
        (
            {"workspace": "ws-a", "amount": True, "currency": "USD"},
            "amount: must be a decimal number or string",
        ),
        (
            {"workspace": "ws-a", "amount": "1.005", "currency": "USD"},
            "amount: '1.005' has more decimals than USD is billed in (2)",
        ),
        (
            {"workspace": "ws-a", "amount": "1", "currency": "usd"},
            "currency: 'usd' is not an ISO 4217 code",
        ),
        (
            {"workspace": "ws-a", "amount": "1", "currency": "USD", "period": "week"},
            "period: 'week' is not one of month",
        ),
        (
            {"workspace": "ws-a", "amount": "1", "currency": "USD", "action": "kill"},
            "action: 'kill' is not one of notify, stop",
        ),
        (
            {"workspace": "ws-a", "amount": "1", "currency": "USD", "limit": 3},
            "budget #1 (workspace ws-a): unknown field 'limit'",
        ),
        ({"workspace": "a b", "amount": "1", "currency": "USD"}, "workspace: 'a b' is not"),
        ("ws-a", "budget #1: an entry is a mapping"),
    ],
)
def test_a_bad_entry_is_refused_naming_entry_and_field(entry: object, message: str) -> None:
    with pytest.raises(BudgetFileError) as caught:
        budgets_from_document({"budgets": [entry]}, _scale)
    assert message in str(caught.value)


def test_every_problem_is_reported_at_once_and_a_workspace_twice_is_refused() -> None:
    with pytest.raises(BudgetFileError) as caught:
        budgets_from_document(
            _doc(
                {"workspace": "ws-a", "amount": "1", "currency": "USD"},
                {"workspace": "ws-a", "amount": "2", "currency": "USD"},
                {"workspace": "ws-c", "amount": "x", "currency": "USD"},
            ),
            _scale,
        )
    text = str(caught.value)
    assert "budget #2 (workspace ws-a): a second budget for the workspace (first: #1)" in text
    assert "budget #3 (workspace ws-c): amount: 'x' is not a decimal number" in text
    assert "\n" not in text


def test_the_currency_must_be_the_one_billing_posts_in() -> None:
    with pytest.raises(BudgetFileError, match="currency: EUR, but the price book bills in USD"):
        budgets_from_document(
            _doc({"workspace": "ws-a", "amount": "1", "currency": "EUR"}), _scale, "USD"
        )


def test_top_level_shape_is_checked() -> None:
    with pytest.raises(BudgetFileError, match="unknown top-level field"):
        budgets_from_document({"budget": []}, _scale)
    with pytest.raises(BudgetFileError, match="a budget file is a list"):
        budgets_from_document({"budgets": {"ws-a": 1}}, _scale)


def test_the_diff_sets_new_and_changed_budgets_and_removes_absent_ones() -> None:
    a = Budget("ws-a", 100, "USD", 2, "month", "stop")
    b = Budget("ws-b", 200, "USD", 2)
    c = Budget("ws-c", 300, "USD", 2)
    assert diff_budgets({"ws-a": a, "ws-b": b}, {"ws-a": a, "ws-b": b}) == []
    raised = Budget("ws-a", 500, "USD", 2, "month", "stop")
    events = diff_budgets({"ws-a": a, "ws-b": b}, {"ws-a": raised, "ws-c": c})
    assert events == [raised.to_event(), c.to_event(), BudgetRemoved(workspace="ws-b")]
    assert isinstance(events[0], BudgetSet) and Budget.from_event(events[0]) == raised


def test_periods_are_calendar_months_in_utc() -> None:
    p = period_of("month", datetime(2026, 11, 30, 23, 59, tzinfo=UTC))
    assert (p.key, p.start, p.end) == (
        "2026-11",
        datetime(2026, 11, 1, tzinfo=UTC),
        datetime(2026, 12, 1, tzinfo=UTC),
    )
    assert period_of("month", datetime(2026, 12, 1, tzinfo=UTC)).key == "2026-12"


_UNIT = 10**9  # precise units per minor unit


def test_exceeded_means_spent_rounded_to_minor_units_is_above_the_budget() -> None:
    assert not is_exceeded(2000, 2000 * _UNIT)
    assert not is_exceeded(2000, 2000 * _UNIT + _UNIT // 2)  # 2000.5 rounds to even 2000
    assert is_exceeded(2000, 2000 * _UNIT + _UNIT // 2 + 1)
    assert is_exceeded(2001, 2001 * _UNIT + _UNIT // 2)  # 2001.5 rounds to 2002
    assert is_exceeded(0, _UNIT)
    assert not is_exceeded(0, 0)


@given(st.integers(0, 10**12), st.integers(-(10**21), 10**21))
def test_the_crossing_threshold_agrees_with_the_rule(budget: int, spent: int) -> None:
    assert is_exceeded(budget, spent) == (spent >= exceeding_precise(budget))


def test_rescale_between_scales() -> None:
    assert rescale(1050, 2, 4) == 105000
    assert rescale(105000, 4, 2) == 1050
    assert rescale(1055, 3, 2) == 106  # half-even: 105.5 -> 106
    assert rescale(1045, 3, 2) == 104


def test_only_pay_as_you_go_jobs_holding_resources_stop() -> None:
    for mode in ("public", "spot", "idle"):
        assert stops(mode, "Running") and stops(mode, "Admitted") and stops(mode, "Restarting")
        for status in ("Creating", "Queuing", "Preempted", "Succeeded", "Stopping", "Stopped"):
            assert not stops(mode, status)
    assert not stops("quota", "Running")
    assert not stops(None, "Running")


def _at(day: int, hour: int = 0, month: int = 11) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=UTC)


def test_exhaustion_lasts_for_the_crossed_budget_within_its_period() -> None:
    stop = Budget("ws-a", 2000, "USD", 2, "month", "stop")
    crossings = [Crossing("set-1", "2026-11", _at(5, 7))]
    assert is_exhausted(stop, "set-1", crossings, _at(5, 7))
    assert is_exhausted(stop, "set-1", crossings, _at(30, 23))
    assert not is_exhausted(stop, "set-1", crossings, _at(5, 6))  # not crossed yet
    assert not is_exhausted(stop, "set-1", crossings, _at(1, 0, month=12))  # next period
    assert not is_exhausted(stop, "set-2", crossings, _at(6))  # a new (raised) budget
    notify = Budget("ws-a", 2000, "USD", 2, "month", "notify")
    assert not is_exhausted(notify, "set-1", crossings, _at(6))


def test_one_crossing_id_per_budget_and_period() -> None:
    first = exceeded_event_id("ws-a", "2026-11", "set-1")
    assert first == exceeded_event_id("ws-a", "2026-11", "set-1")
    assert first != exceeded_event_id("ws-a", "2026-12", "set-1")
    assert first != exceeded_event_id("ws-a", "2026-11", "set-2")
    assert first != exceeded_event_id("ws-b", "2026-11", "set-1")
