"""Posted cost crossing a budget: one BudgetExceeded, exhausted workspaces, the jobs to stop."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import text

from ledger.store.postgres import PostgresEventStore
from processes.budgets.checks import StoreBudgetGate, check_budgets
from projections.budgets.projection import exhausted_workspaces, jobs_to_stop
from tests.support.budgets import (
    at,
    budget_file,
    job,
    pending_job,
    post_cost,
    project,
    publish_prices,
)
from tests.support.clis import CliCall

STOP_20 = """
budgets:
  - {workspace: ws-a, amount: "20.00", currency: USD, period: month, action: stop}
  - {workspace: ws-b, amount: 5, currency: USD, action: notify}
"""


def _events(store: PostgresEventStore, kind: str) -> list[dict[str, object]]:
    with store.engine.connect() as conn:
        return [
            {**r.data, "_stream": r.stream, "_at": r.occurred_at, "_source": r.source}
            for r in conn.execute(
                text(
                    "SELECT data, stream, occurred_at, source FROM events WHERE type = :t "
                    "ORDER BY position"
                ),
                {"t": kind},
            )
        ]


def _setup(store: PostgresEventStore, cli: CliCall, tmp_path: Path) -> None:
    """ws-a: a public and a spot job running from the epoch (3.30 USD an hour together), a
    subscription-quota job running, a public job already done; ws-b: a public job."""
    publish_prices(store)
    cli(
        "budgets",
        "apply",
        "--allow-unknown-workspace",
        str(budget_file(tmp_path, STOP_20)),
        "--effective-at",
        "2026-11-01",
    )
    job(store, "a-public", "ws-a", "public", at(0))
    job(store, "a-spot", "ws-a", "spot", at(0), kind="TFJob")
    job(store, "a-quota", "ws-a", "quota", at(0))
    job(store, "a-done", "ws-a", "public", at(0), at(1))
    job(store, "b-public", "ws-b", "public", at(0))
    post_cost(store, range(1, 11))
    project(store)


def test_a_crossing_is_stored_once_at_the_posting_that_crossed(
    store: PostgresEventStore, cli: CliCall, tmp_path: Path
) -> None:
    _setup(store, cli, tmp_path)
    with store.engine.connect() as conn:
        # at 05:00: ws-a spent 2.40 (done job) + 5 x 3.30 = 18.90 of 20.00; ws-b 12.00 of
        # 5.00, crossed at 03:00 (7.20; 4.80 at 02:00)
        early = check_budgets(store, conn, at(5))
        assert [(b.workspace, b.spent_minor, b.at) for b in early] == [("ws-b", 720, at(3))]
        first = check_budgets(store, conn, at(10.5))
        again = check_budgets(store, conn, at(10.5))
        later = check_budgets(store, conn, at(10.9))
    assert [(b.workspace, b.period, b.budget_minor, b.spent_minor, b.at) for b in first] == [
        ("ws-a", "2026-11", 2000, 2220, at(6))  # 2.40 + 6 x 3.30
    ]
    assert again == [] and later == []
    exceeded = _events(store, "BudgetExceeded")
    assert [(e["workspace"], e["action"], e["_stream"], e["_at"]) for e in exceeded] == [
        ("ws-b", "notify", "budget/ws-b", at(3)),
        ("ws-a", "stop", "budget/ws-a", at(6)),
    ]
    assert exceeded[1]["budget_minor"] == 2000 and exceeded[1]["spent_minor"] == 2220
    notes = _events(store, "NotificationQueued")
    assert [(n["target"], n["body"]["spent"]) for n in notes] == [  # type: ignore[index]
        ("workspace/ws-b", "7.2"),
        ("workspace/ws-a", "22.2"),
    ]
    # the CLI's check finds nothing new either
    assert "no budget newly exceeded" in cli("budgets", "check", "--at", "2026-11-05T11:00Z")
    assert len(_events(store, "BudgetExceeded")) == 2


def test_stop_exhausts_the_workspace_and_lists_only_its_pay_as_you_go_jobs(
    store: PostgresEventStore, cli: CliCall, tmp_path: Path
) -> None:
    _setup(store, cli, tmp_path)
    with store.engine.connect() as conn:
        assert exhausted_workspaces(conn, at(10.5)) == frozenset()  # nothing checked yet
        check_budgets(store, conn, at(10.5))
        assert exhausted_workspaces(conn, at(10.5)) == {"ws-a"}  # ws-b only notifies
        assert exhausted_workspaces(conn, at(5.5)) == frozenset()  # before the crossing
        stop = jobs_to_stop(conn, at(10.5))
    assert [(j.job_uid, j.namespace, j.name, j.kind, j.billing_mode, j.status) for j in stop] == [
        ("a-public", "ns-ws-a", "a-public-name", "PyTorchJob", "public", "Running"),
        ("a-spot", "ns-ws-a", "a-spot-name", "TFJob", "spot", "Running"),
    ]  # never the subscription job a-quota (running), nor a-done (succeeded)
    shown = cli("budgets", "show", "--at", "2026-11-05T10:30Z", "--format", "json")
    assert '"exhausted": true' in shown and '"state": "exceeded"' in shown


def test_the_next_period_is_not_exhausted(
    store: PostgresEventStore, cli: CliCall, tmp_path: Path
) -> None:
    _setup(store, cli, tmp_path)
    with store.engine.connect() as conn:
        check_budgets(store, conn, at(10.5))
        assert exhausted_workspaces(conn, datetime(2026, 11, 30, 23, tzinfo=UTC)) == {"ws-a"}
        december = datetime(2026, 12, 1, 1, tzinfo=UTC)
        assert exhausted_workspaces(conn, december) == frozenset()
        assert jobs_to_stop(conn, december) == []
        assert check_budgets(store, conn, december) == []  # nothing posted in December yet


def test_a_raised_budget_lifts_the_stop_until_it_is_crossed_in_turn(
    store: PostgresEventStore, cli: CliCall, tmp_path: Path
) -> None:
    _setup(store, cli, tmp_path)
    with store.engine.connect() as conn:
        check_budgets(store, conn, at(10.5))
    raised = budget_file(tmp_path, STOP_20.replace('"20.00"', '"60.00"'), "raised.yaml")
    out = cli(
        "budgets",
        "apply",
        "--allow-unknown-workspace",
        str(raised),
        "--effective-at",
        "2026-11-05T11:00Z",
    )
    assert "changed the budget of workspace ws-a: 60 USD per month, action stop (was 20 USD" in out
    post_cost(store, range(11, 20))
    project(store)
    with store.engine.connect() as conn:
        assert exhausted_workspaces(conn, at(10.9)) == {"ws-a"}  # the old budget, then
        assert check_budgets(store, conn, at(11.5)) == []  # 2.40 + 11 x 3.30 = 38.70 of 60
        assert exhausted_workspaces(conn, at(11.5)) == frozenset()
        assert jobs_to_stop(conn, at(11.5)) == []
        # crossed in turn at 18:00 (61.80; 58.50 at 17:00): a second crossing, of the new budget
        (second,) = check_budgets(store, conn, at(19.5))
        assert (second.workspace, second.budget_minor, second.spent_minor) == ("ws-a", 6000, 6180)
        assert second.at == at(18)
        assert exhausted_workspaces(conn, at(19.5)) == {"ws-a"}
        assert exhausted_workspaces(conn, at(17.5)) == frozenset()


def test_a_budget_set_below_what_was_spent_is_crossed_when_set(
    store: PostgresEventStore, cli: CliCall, tmp_path: Path
) -> None:
    _setup(store, cli, tmp_path)
    lower = budget_file(tmp_path, STOP_20.replace('"20.00"', '"10.00"'), "lower.yaml")
    cli(
        "budgets",
        "apply",
        "--allow-unknown-workspace",
        str(lower),
        "--effective-at",
        "2026-11-05T08:30Z",
    )
    with store.engine.connect() as conn:
        breaches = check_budgets(store, conn, at(10))
    a = [b for b in breaches if b.workspace == "ws-a"]
    # the 10.00 budget: crossed by the postings before it existed; stored as of when it was set,
    # with what was spent by then (2.40 + 8 x 3.30); the 20.00 one, in force until 08:30, was
    # never checked while in force: a check judges the budget in force at its instant
    assert [(b.budget_minor, b.spent_minor, b.at) for b in a] == [(1000, 2880, at(8.5))]


def test_idle_and_admitted_jobs_stop_too_queued_ones_wait(
    store: PostgresEventStore, cli: CliCall, tmp_path: Path
) -> None:
    _setup(store, cli, tmp_path)
    job(store, "a-idle", "ws-a", "idle", at(9))
    pending_job(store, "a-admitted", "ws-a", at(10), admitted=True)
    pending_job(store, "a-queued", "ws-a", at(10), admitted=False)
    project(store)
    with store.engine.connect() as conn:
        check_budgets(store, conn, at(10.5))
        stop = {(j.job_uid, j.billing_mode, j.status) for j in jobs_to_stop(conn, at(10.5))}
    assert stop == {
        ("a-public", "public", "Running"),
        ("a-spot", "spot", "Running"),
        ("a-idle", "idle", "Running"),
        ("a-admitted", "public", "Admitted"),
    }  # a-queued is not running: the dispatcher refuses to admit it instead


def test_the_dispatcher_gate_checks_then_reads_in_the_cycle_snapshot(
    store: PostgresEventStore, cli: CliCall, tmp_path: Path
) -> None:
    _setup(store, cli, tmp_path)
    gate = StoreBudgetGate(store)
    with store.snapshot() as uow:  # as the dispatcher reads a cycle: one REPEATABLE READ view
        assert gate.exhausted_workspaces(uow.connection, at(10.5)) == {"ws-a"}
        assert gate.jobs_to_stop(uow.connection, at(10.5)) == ["a-public", "a-spot"]
    assert [(b.workspace, b.at) for b in gate.breaches] == [("ws-a", at(6)), ("ws-b", at(3))]
    with store.snapshot() as uow:
        assert gate.exhausted_workspaces(uow.connection, at(10.6)) == {"ws-a"}
    assert gate.breaches == []  # stored once


def test_concurrent_checks_store_one_crossing(
    store: PostgresEventStore, cli: CliCall, tmp_path: Path
) -> None:
    _setup(store, cli, tmp_path)
    stored: list[int] = []
    start = threading.Barrier(4)

    def checker() -> None:
        start.wait()
        with store.engine.connect() as conn:
            stored.append(len(check_budgets(store, conn, at(10.5))))

    threads = [threading.Thread(target=checker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(stored) == [0, 0, 0, 2]
    assert sorted(e["workspace"] for e in _events(store, "BudgetExceeded")) == ["ws-a", "ws-b"]
    assert len(_events(store, "NotificationQueued")) == 2


def test_the_read_model_rebuilds_to_the_same_rows(
    store: PostgresEventStore, cli: CliCall, tmp_path: Path
) -> None:
    _setup(store, cli, tmp_path)
    with store.engine.connect() as conn:
        check_budgets(store, conn, at(10.5))

    def rows() -> list[object]:
        with store.engine.connect() as conn:
            return [
                *conn.execute(text("SELECT * FROM budget_changes ORDER BY position")).all(),
                *conn.execute(text("SELECT * FROM budget_exceedances ORDER BY position")).all(),
            ]

    before = rows()
    assert len(before) == 4
    assert "rebuilt budgets" in cli("projections", "rebuild", "budgets")
    assert rows() == before
