"""``dlc-ledger quotas apply`` is idempotent and appends only the differences."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from dlc_ledger.cli.app import app
from dlc_ledger.wiring import context
from ledger.store.postgres import PostgresEventStore
from projections.registry import catch_up_all
from tests.support.demo_files import DEMO_QUOTAS as DEMO
from tests.support.quotas import occ_started

Cli = Callable[..., str]


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("USER", "alice")
    context.settings.cache_clear()
    runner = CliRunner()

    def call(*args: str, ok: bool = True) -> str:
        result = runner.invoke(app, list(args))
        if ok:
            assert result.exit_code == 0, (result.output, result.exception)
        else:
            assert result.exit_code != 0, result.output
            return result.output + str(result.exception or "")
        return result.stdout

    yield call
    context.settings.cache_clear()


def _events(store: PostgresEventStore) -> list[tuple[str, str, str]]:
    with store.engine.connect() as conn:
        return [
            (r.type, r.stream, r.source)
            for r in conn.execute(text("SELECT type, stream, source FROM events ORDER BY position"))
        ]


def test_apply_twice_appends_nothing_the_second_time(cli: Cli, store: PostgresEventStore) -> None:
    out = cli("quotas", "apply", str(DEMO), "--at", "2026-11-01T00:00:00Z")
    assert "created quota openb" in out and "bound workspace ws-be to be" in out
    first = _events(store)
    assert len(first) == 7 + 4
    assert {source for _, _, source in first} == {"api/alice"}
    assert ("QuotaCreated", "quota/ls", "api/alice") in first
    assert ("WorkspaceBound", "workspace/ws-ls", "api/alice") in first
    assert cli("quotas", "apply", str(DEMO)).strip() == "no changes"
    assert _events(store) == first


def test_a_changed_file_emits_only_the_differences(
    cli: Cli, store: PostgresEventStore, tmp_path: Path
) -> None:
    cli("quotas", "apply", str(DEMO), "--at", "2026-11-01T00:00:00Z")
    before = len(_events(store))
    changed = tmp_path / "changed.yaml"
    changed.write_text(
        DEMO.read_text()
        .replace("max: {gpu/any: 48000, cpu: 600000", "max: {gpu/any: 40000, cpu: 600000")
        .replace("workspaces: [ws-guaranteed]", "workspaces: []")
    )
    dry = cli("quotas", "apply", str(changed), "--dry-run", "--prune")
    assert "would append QuotaChanged to quota/burstable at " in dry
    assert "changed quota burstable: max.gpu/any 48000 -> 40000" in dry
    assert len(_events(store)) == before
    out = cli("quotas", "apply", str(changed), "--prune")
    assert "unbound workspace ws-guaranteed (was guaranteed)" in out
    assert _events(store)[before:] == [
        ("QuotaChanged", "quota/burstable", "api/alice"),
        ("WorkspaceBound", "workspace/ws-guaranteed", "api/alice"),
    ]
    # back to the original: the reverse differences, with fresh ids (streams moved on)
    out = cli("quotas", "apply", str(DEMO))
    assert len(_events(store)) == before + 4
    assert cli("quotas", "apply", str(DEMO)).strip() == "no changes"


def test_invalid_file_is_one_clear_error(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {name: a, min: {cpu: 1}, colour: red}\n")
    out = cli("quotas", "apply", str(bad), ok=False)
    assert "quota 'a': unknown field(s) ['colour']" in out


def test_list_show_and_quota_usage_report(cli: Cli, store: PostgresEventStore) -> None:
    cli("quotas", "apply", str(DEMO), "--at", "2026-11-01T00:00:00Z")
    from tests.support.quotas import at

    store.append([occ_started("p1", "j1", "ws-be", at(60), mode="idle", mgpu=2000)])
    catch_up_all(store)  # reads never project: the projector (here, the test) does
    listing = json.loads(cli("quotas", "list", "--format", "json"))
    assert [r["quota"] for r in listing][:3] == ["openb", "offline", "be"]
    shown = cli("quotas", "show", "be")
    assert "workspaces  ws-be" in shown and "gpu/any" in shown
    rows = json.loads(cli("report", "quota-usage", "--format", "json"))
    be = next(r for r in rows if r["quota"] == "be" and r["flavor"] == "gpu/any")
    assert {k: be[k] for k in ("min", "max", "used", "borrowed", "lent", "queued")} == {
        "min": 0,
        "max": 40000,
        "used": 2000,
        "borrowed": 2000,
        "lent": 0,
        "queued": 0,
    }
    offline = next(r for r in rows if r["quota"] == "offline" and r["flavor"] == "gpu/any")
    assert offline["lent"] == 2000  # from its shared pool
    early = json.loads(
        cli("report", "quota-usage", "--at", "2026-11-01T00:00:30Z", "--format", "json")
    )
    assert next(r for r in early if r["quota"] == "be" and r["flavor"] == "gpu/any")["used"] == 0
    assert "borrowed" in cli("report", "quota-usage")
    assert "no quota named 'nope'" in cli("quotas", "show", "nope", ok=False)


def test_quota_history_report(cli: Cli, store: PostgresEventStore) -> None:
    from tests.support.quotas import at, occ_ended

    cli("quotas", "apply", str(DEMO), "--at", "2026-11-01T00:00:00Z")
    # j2's pod arrives first, from another partition, though j1's came and went before it:
    # the history is in cluster time
    store.append([occ_started("p2", "j2", "ws-be", at(120), mode="idle", mgpu=1000)])
    store.append(
        [
            occ_started("p1", "j1", "ws-be", at(60), mode="idle", mgpu=2000),
            occ_ended("p1", "j1", at(90)),
        ]
    )
    catch_up_all(store)
    rows = json.loads(
        cli(
            "report", "quota-history", "--quota", "be", "--flavor", "gpu/any", "--step", "change",
            "--format", "json",
        )
    )  # fmt: skip
    assert [(r["at"], r["used"], r["borrowed"], r["deleted"]) for r in rows] == [
        ("2026-11-01T00:00:00Z", 0, 0, False),
        ("2026-11-01T00:01:00Z", 2000, 2000, False),
        ("2026-11-01T00:01:30Z", 0, 0, False),
        ("2026-11-01T00:02:00Z", 1000, 1000, False),
    ]
    window = json.loads(
        cli(
            "report", "quota-history", "--quota", "be", "--flavor", "gpu/any", "--step", "change",
            "--from", "2026-11-01T00:01:10Z", "--to", "2026-11-01T00:02:00Z", "--format", "json",
        )
    )  # fmt: skip
    assert [(r["at"], r["used"]) for r in window] == [
        ("2026-11-01T00:01:10Z", 2000),
        ("2026-11-01T00:01:30Z", 0),
        ("2026-11-01T00:02:00Z", 1000),
    ]
    assert "deleted" in cli("report", "quota-history", "--quota", "be", "--step", "change")
    out = cli(
        "report", "quota-history", "--from", "2026-11-02T00:00:00Z", "--to", "2026-11-01T00:00:00Z",
        ok=False,
    )  # fmt: skip
    assert "is before --from" in out


def test_a_file_that_leaves_nodes_out_keeps_them_unless_pruned(
    cli: Cli, store: PostgresEventStore, tmp_path: Path
) -> None:
    """An empty or truncated file deletes nothing without --prune (as kubectl apply)."""
    cli("quotas", "apply", str(DEMO), "--effective-at", "2026-11-01T00:00:00Z")
    before = _events(store)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    out = cli("quotas", "apply", str(empty))
    assert "no changes" in out
    assert "kept 7 quota(s) and 4 workspace binding(s)" in out and "--prune" in out
    assert _events(store) == before
    # truncated: only the root and one branch; the rest is kept, the root's change applied
    truncated = tmp_path / "truncated.yaml"
    truncated.write_text(DEMO.read_text().split("  - name: offline")[0])
    out = cli("quotas", "apply", str(truncated))
    assert "kept 3 quota(s) and 2 workspace binding(s)" in out
    assert _events(store) == before
    listing = json.loads(cli("quotas", "list", "--format", "json"))
    assert len(listing) == 7
    # a dry run with --prune shows the deletions as events and appends none
    dry = cli("quotas", "apply", str(empty), "--prune", "--dry-run")
    assert "would append QuotaDeleted to quota/be at " in dry
    assert "would append WorkspaceBound to workspace/ws-be at " in dry
    assert "appended nothing (--dry-run)" in dry
    assert _events(store) == before
    out = cli("quotas", "apply", str(empty), "--prune")
    assert "deleted quota openb" in out and "applied 11 change(s)" in out
    assert json.loads(cli("quotas", "list", "--format", "json")) == []


def test_kept_nodes_must_still_form_a_valid_tree(cli: Cli, tmp_path: Path) -> None:
    cli("quotas", "apply", str(DEMO), "--at", "2026-11-01T00:00:00Z")
    # ws-be stays bound to be, which the file turns into an inner quota
    changed = tmp_path / "inner.yaml"
    changed.write_text(
        "- {name: openb, min: {gpu/any: 80000}}\n"
        "- {name: offline, parent: openb, min: {gpu/any: 20000}}\n"
        "- {name: be, parent: offline, min: {gpu/any: 1000}}\n"
        "- {name: be-child, parent: be, min: {gpu/any: 1000}}\n"
    )
    out = cli("quotas", "apply", str(changed), ok=False)
    assert "once the quotas and bindings the file leaves out are kept" in out


def test_effective_time_places_the_tree_in_cluster_time(
    cli: Cli, store: PostgresEventStore, tmp_path: Path
) -> None:
    """A tree applied at a replay's start is in force at every instant of the replay;
    one applied by default (now) inside a stored history says so."""
    from tests.support.quotas import at

    cli("quotas", "apply", str(DEMO), "--effective-at", "2026-11-01T00:00:00Z")
    store.append([occ_started("p1", "j1", "ws-be", at(3600), mode="idle", mgpu=2000)])
    with store.engine.connect() as conn:
        stamped = {
            r[0]
            for r in conn.execute(
                text("SELECT occurred_at FROM events WHERE stream LIKE 'quota/%'")
            )
        }
    assert stamped == {at(0)}

    def quotas_at(when: str) -> set[str]:
        rows = json.loads(cli("report", "quota-usage", "--at", when, "--format", "json"))
        return {r["quota"] for r in rows}

    assert quotas_at("2026-11-01T00:30:00Z") == quotas_at("2026-11-01T02:00:00Z")
    assert "be" in quotas_at("2026-11-01T00:30:00Z")
    # cluster facts far in the future: a default (wall clock) effective time lands before them
    store.append([occ_started("p2", "j2", "ws-be", at(3600 * 24 * 365 * 80), mode="idle")])
    changed = tmp_path / "changed.yaml"
    changed.write_text(DEMO.read_text().replace("max: {gpu/any: 40000,", "max: {gpu/any: 30000,"))
    result = CliRunner().invoke(app, ["quotas", "apply", str(changed)])
    assert result.exit_code == 0, result.output
    assert "the change takes effect inside that history" in result.stderr


def test_a_queue_policy_change_is_applied_and_shown(
    cli: Cli, store: PostgresEventStore, tmp_path: Path
) -> None:
    cli("quotas", "apply", str(DEMO), "--at", "2026-11-01T00:00:00Z")
    before = len(_events(store))
    text_ = DEMO.read_text()
    old = "queue_policy: Priority\n    workspaces: [ws-guaranteed]"
    assert old in text_
    changed = tmp_path / "queues.yaml"
    changed.write_text(
        text_.replace(
            old,
            "queue_policy: Balance\n    balance_timeout: 300\n    fair_sharing_weight: 2\n"
            "    workspaces: [ws-guaranteed]",
        )
    )
    out = cli("quotas", "apply", str(changed))
    assert "queue_policy Priority -> Balance" in out
    assert "balance_timeout None -> 300" in out and "fair_sharing_weight 1 -> 2" in out
    assert _events(store)[before:] == [("QuotaChanged", "quota/guaranteed", "api/alice")]
    shown = cli("quotas", "show", "guaranteed")
    assert "queue       Balance balance_timeout=300s" in shown
    assert "fair share  weight=2" in shown
    assert cli("quotas", "apply", str(changed)).strip() == "no changes"
    # the platform's Retry is the default; Skip is a change, applied, shown and diffed
    skip = tmp_path / "skip.yaml"
    skip.write_text(
        changed.read_text().replace(
            "    workspaces: [ws-guaranteed]",
            "    on_unfit_head: Skip\n    workspaces: [ws-guaranteed]",
        )
    )
    assert "on_unfit_head Retry -> Skip" in cli("quotas", "apply", str(skip))
    assert "on_unfit_head=Skip" in cli("quotas", "show", "guaranteed")
    assert "on_unfit_head Skip -> Retry" in cli("quotas", "apply", str(changed))
