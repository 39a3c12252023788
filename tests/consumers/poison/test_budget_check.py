"""The budget check (each dispatcher cycle, ``budgets check``): a crossing whose
``BudgetExceeded`` cannot be built is dead-lettered; the other crossings are stored.

Poison: ws-a's posted cost in the month sums past the bound of a fact's integer (two
charges at one instant of 5 x 10**15 minor units each, every one within its own bound:
together more than 2**53 - 1). The crossing's ``BudgetExceeded.spent_minor`` breaks its bound:
``make_envelope`` raises ``OutOfBounds``. Before issue 44 that error left
:func:`processes.budgets.checks.check_budgets` with nothing stored, every cycle: no
budget crossed again, no ``stop`` budget stopped anything, and the dispatcher's cycle
(which checks the budgets first) failed with it.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest

from ledger.envelopes import make_envelope
from ledger.events import LedgerTransactionPosted, Posting
from ledger.store.postgres import PostgresEventStore
from processes.budgets import checks
from processes.budgets.checks import StoreBudgetGate, check_budgets
from projections.budgets.projection import exhausted_workspaces
from tests.support.budgets import at, budget_file, job, post_cost, project, publish_prices
from tests.support.clis import CliCall
from tests.support.letters import listed_letters

BUDGETS = """
budgets:
  - {workspace: ws-a, amount: "20.00", currency: USD, period: month, action: stop}
  - {workspace: ws-b, amount: 5, currency: USD, action: stop}
"""

#: one charge, within every bound of a posting; two of them sum past 2**53 - 1
CHARGE = Decimal(5 * 10**15)


def _charge(store: PostgresEventStore, n: int, when: datetime) -> None:
    """A charge of :data:`CHARGE` minor units to ws-a (receivable against revenue)."""
    txn = LedgerTransactionPosted(
        transaction_id=f"charge-{n}",
        postings=(
            Posting(account="receivable/ws-a", amount_minor=CHARGE, currency="USD"),
            Posting(account="revenue/charges", amount_minor=-CHARGE, currency="USD"),
        ),
        period="2026-11",
        memo="a charge",
    )
    store.append(
        [
            make_envelope(
                txn,
                event_id=uuid.uuid4(),
                stream="account/receivable/ws-a",
                occurred_at=when,
                observed_at=when,
                source="test",
            )
        ]
    )


def _world(store: PostgresEventStore, cli: CliCall, tmp_path: Path) -> None:
    """ws-a: two charges at 01:00 summing beyond what a fact's integer can hold; ws-b: a
    public job (2.40 USD an hour) crossing its 5.00 at 03:00."""
    publish_prices(store)
    cli(
        "budgets",
        "apply",
        "--allow-unknown-workspace",
        str(budget_file(tmp_path, BUDGETS)),
        "--effective-at",
        "2026-11-01",
    )
    _charge(store, 1, at(1))
    _charge(store, 2, at(1))
    job(store, "b-public", "ws-b", "public", at(0))
    post_cost(store, range(1, 5))
    project(store)


def test_a_crossing_that_cannot_be_built_is_dead_lettered_and_the_check_goes_on(
    store: PostgresEventStore, cli: CliCall, tmp_path: Path
) -> None:
    _world(store, cli, tmp_path)
    # the dispatcher's seam: checks, then reads the exhausted workspaces
    gate = StoreBudgetGate(store)
    with store.engine.connect() as conn:
        exhausted = gate.exhausted_workspaces(conn, at(4))
    assert [(b.workspace, b.spent_minor, b.at) for b in gate.breaches] == [("ws-b", 720, at(3))]
    assert exhausted == {"ws-b"}
    letters = listed_letters(cli)
    assert [(r["source"], r["reason"], r["count"]) for r in letters] == [
        ("budgets/check", "check-failed", 1)
    ]
    assert "ws-a" in str(letters[0]["error"]) and "OutOfBounds" in str(letters[0]["error"])
    assert "spent_minor" in str(letters[0]["error"])

    # the next check looks at it again (the letter is seen again); ws-b's crossing is
    # stored once
    with store.engine.connect() as conn:
        assert check_budgets(store, conn, at(4.5)) == []
        assert exhausted_workspaces(conn, at(4.5)) == {"ws-b"}
    assert [r["count"] for r in listed_letters(cli)] == [2]

    # requeue (the next check looks at it again) or discard
    assert "tried again" in cli("dead-letters", "retry", str(letters[0]["id"]))
    assert listed_letters(cli) == []


def test_a_bug_still_fails_the_check(
    store: PostgresEventStore, cli: CliCall, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the item's faults are quarantined: anything else fails the check as before."""
    _world(store, cli, tmp_path)

    def broken(*args: object, **kw: object) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr(checks, "_envelopes", broken)
    with store.engine.connect() as conn, pytest.raises(KeyError):
        check_budgets(store, conn, at(4))
    assert listed_letters(cli) == []
