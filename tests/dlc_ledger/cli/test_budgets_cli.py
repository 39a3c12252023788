"""``dlc-ledger budgets apply|show`` through the real CLI: diff, idempotency, dry-run, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text

from ledger.store.postgres import PostgresEventStore
from tests.support.budgets import at, budget_file, job, post_cost, project, publish_prices
from tests.support.clis import CliCall

TWO = """
budgets:
  - workspace: ws-a
    amount: "1000.00"
    currency: USD
    period: month
    action: stop
  - {workspace: ws-b, amount: 250, currency: USD}
"""


@pytest.fixture(autouse=True)
def _user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("USER", "alice")


def _events(store: PostgresEventStore) -> list[tuple[str, str, str, dict[str, object]]]:
    with store.engine.connect() as conn:
        return [
            (r.type, r.stream, r.source, r.data)
            for r in conn.execute(
                text(
                    "SELECT type, stream, source, data FROM events "
                    "WHERE stream LIKE 'budget/%' ORDER BY position"
                )
            )
        ]


def test_apply_twice_stores_nothing_the_second_time(
    cli: CliCall, store: PostgresEventStore, tmp_path: Path
) -> None:
    path = budget_file(tmp_path, TWO)
    out = cli(
        "budgets", "apply", "--allow-unknown-workspace", str(path), "--effective-at", "2026-11-01"
    )
    assert "set the budget of workspace ws-a: 1000 USD per month, action stop" in out
    assert "set the budget of workspace ws-b: 250 USD per month, action notify" in out
    assert "applied 2 change(s)" in out
    first = _events(store)
    assert [(t, s, src) for t, s, src, _ in first] == [
        ("BudgetSet", "budget/ws-a", "api/alice"),
        ("BudgetSet", "budget/ws-b", "api/alice"),
    ]
    assert first[0][3] == {
        "workspace": "ws-a",
        "amount_minor": 100000,
        "currency": "USD",
        "scale": 2,
        "period": "month",
        "action": "stop",
    }
    # the same budgets, written differently: nothing changes
    same = budget_file(tmp_path, TWO.replace('"1000.00"', "1000"), "same.yaml")
    assert cli("budgets", "apply", "--allow-unknown-workspace", str(same)).strip() == "no changes"
    assert cli("budgets", "apply", "--allow-unknown-workspace", str(path)).strip() == "no changes"
    assert _events(store) == first


def test_a_changed_file_stores_only_the_differences_and_dry_run_stores_none(
    cli: CliCall, store: PostgresEventStore, tmp_path: Path
) -> None:
    cli(
        "budgets",
        "apply",
        "--allow-unknown-workspace",
        str(budget_file(tmp_path, TWO)),
        "--effective-at",
        "2026-11-01",
    )
    before = _events(store)
    changed = budget_file(
        tmp_path,
        """
budgets:
  - {workspace: ws-a, amount: "1500.00", currency: USD, action: stop}
  - {workspace: ws-c, amount: "10.50", currency: USD, action: notify}
""",
        "changed.yaml",
    )
    dry = cli(
        "budgets",
        "apply",
        "--allow-unknown-workspace",
        str(changed),
        "--dry-run",
        "--effective-at",
        "2026-11-10",
    )
    assert (
        "would append BudgetSet to budget/ws-a at 2026-11-10T00:00:00Z: changed the budget of "
        "workspace ws-a: 1500 USD per month, action stop (was 1000 USD per month, action stop)"
    ) in dry
    assert "would append BudgetSet to budget/ws-c" in dry
    assert "would append BudgetRemoved to budget/ws-b" in dry
    assert "removed the budget of workspace ws-b (was 250 USD)" in dry
    assert "would apply 3 change(s); appended nothing (--dry-run)" in dry
    assert _events(store) == before
    out = cli(
        "budgets",
        "apply",
        "--allow-unknown-workspace",
        str(changed),
        "--effective-at",
        "2026-11-10",
    )
    assert "applied 3 change(s)" in out
    assert [(t, s) for t, s, _, _ in _events(store)[len(before) :]] == [
        ("BudgetSet", "budget/ws-a"),
        ("BudgetSet", "budget/ws-c"),
        ("BudgetRemoved", "budget/ws-b"),
    ]
    assert (
        cli("budgets", "apply", "--allow-unknown-workspace", str(changed)).strip() == "no changes"
    )
    # show follows the effective dates: before the change, the first file's budgets
    early = json.loads(cli("budgets", "show", "--at", "2026-11-05", "--format", "json"))
    assert [(r["workspace"], r["budget"]) for r in early] == [
        ("ws-a", "1000.00"),
        ("ws-b", "250.00"),
    ]
    late = json.loads(cli("budgets", "show", "--at", "2026-11-11", "--format", "json"))
    assert [(r["workspace"], r["budget_minor"], r["action"]) for r in late] == [
        ("ws-a", 150000, "stop"),
        ("ws-c", 1050, "notify"),
    ]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            "budgets:\n  - {workspace: ws-a, amount: '-1', currency: USD}\n",
            "budget #1 (workspace ws-a): amount: '-1' is negative",
        ),
        (
            "budgets:\n  - {workspace: ws-a, amount: 1, currency: USD, action: pause}\n",
            "budget #1 (workspace ws-a): action: 'pause' is not one of notify, stop",
        ),
        (
            "budgets:\n  - {workspace: ws-a, amount: 1}\n",
            "budget #1 (workspace ws-a): currency: required",
        ),
        (
            "budgets:\n  - {workspace: ws-a, amount: 1, currency: EUR}\n",
            "budget #1 (workspace ws-a): currency: EUR, but the price book bills in USD",
        ),
        # "$" matched before a trailing newline: the name is matched whole (issue 44)
        (
            'budgets:\n  - {workspace: "ws-a\\n", amount: 1, currency: USD}\n',
            "workspace: 'ws-a\\n' is not a workspace name",
        ),
        ("budgets: [\n", "not valid YAML: line 2"),
        ("budgets: []\nbudgets: []\n", "duplicate key 'budgets'"),
    ],
)
def test_a_bad_file_is_refused_with_a_clear_error_and_stores_nothing(
    cli: CliCall, store: PostgresEventStore, tmp_path: Path, document: str, message: str
) -> None:
    publish_prices(store)
    out = cli("budgets", "apply", str(budget_file(tmp_path, document)), ok=False)
    assert message in out
    assert _events(store) == []


def test_a_budget_for_a_workspace_the_ledger_does_not_know_is_refused(
    cli: CliCall, store: PostgresEventStore, tmp_path: Path
) -> None:
    """As ``tokens create`` refuses one (issue 44): named, with the known ones listed;
    ``--allow-unknown-workspace`` sets it ahead of its first job."""
    publish_prices(store)
    job(store, "j1", "ws-a", "public", at(1))
    project(store)
    path = budget_file(tmp_path, TWO)
    for dry in ((), ("--dry-run",)):
        out = cli("budgets", "apply", *dry, str(path), ok=False)
        assert "budgets[].workspace: unknown workspace(s) ws-b" in out
        assert "known: ws-a" in out and "--allow-unknown-workspace" in out
    assert _events(store) == []
    assert "applied 2 change(s)" in cli("budgets", "apply", "--allow-unknown-workspace", str(path))


def test_an_unreadable_file_is_an_error(cli: CliCall, tmp_path: Path) -> None:
    out = cli("budgets", "apply", str(tmp_path / "missing.yaml"), ok=False)
    assert "cannot read" in out


def test_show_lists_budget_spent_remaining_action_and_state(
    cli: CliCall, store: PostgresEventStore, tmp_path: Path
) -> None:
    publish_prices(store)
    cli(
        "budgets",
        "apply",
        "--allow-unknown-workspace",
        str(budget_file(tmp_path, TWO.replace('"1000.00"', '"20.00"'))),
        "--at",
        "2026-11-01",
    )
    job(store, "a-public", "ws-a", "public", at(0))
    job(store, "b-public", "ws-b", "public", at(0))
    post_cost(store, range(1, 11))  # 24.00 each by 10:00
    project(store)
    rows = json.loads(cli("budgets", "show", "--at", "2026-11-05T10:30Z", "--format", "json"))
    assert [
        (r["workspace"], r["period"], r["budget"], r["spent"], r["remaining"], r["state"])
        for r in rows
    ] == [
        ("ws-a", "2026-11", "20.00", "24.00", "-4.00", "exceeded"),
        ("ws-b", "2026-11", "250.00", "24.00", "226.00", "ok"),
    ]
    assert rows[0]["exhausted"] is False  # not checked yet
    assert rows[0]["currency"] == "USD" and rows[0]["scale"] == 2
    checked = cli("budgets", "check", "--at", "2026-11-05T10:30Z")
    assert "1 budget(s) newly exceeded" in checked and "ws-a" in checked
    table = cli("budgets", "show", "--at", "2026-11-05T10:30Z")
    lines = {line.split()[0]: line.split() for line in table.splitlines()[3:]}
    assert lines["ws-a"][-3:] == ["stop", "exceeded", "yes"]
    assert lines["ws-b"][-3:] == ["notify", "ok", "no"]
    december = json.loads(cli("budgets", "show", "--at", "2026-12-02", "--format", "json"))
    assert [(r["period"], r["spent_minor"], r["state"], r["exhausted"]) for r in december] == [
        ("2026-12", 0, "ok", False),
        ("2026-12", 0, "ok", False),
    ]
    assert "(no rows)" in cli("budgets", "show", "--at", "2026-10-01")
