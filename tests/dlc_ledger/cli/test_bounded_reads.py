"""Bounded reads through the real CLI: a report's cost follows its facts, not the length
of its window; reports refuse more than the maximum of rows; every list that can grow
pages with ``--limit`` (at most 10,000) and a keyset ``--cursor``."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlc_ledger.cli.app import app
from ledger.store.postgres import PostgresEventStore
from projections.billing import reports as finance_reports
from projections.inventory import occupancy
from projections.quotas.reads import series_points
from projections.registry import catch_up_all
from tests.support.billing import DEMO_BOOK, at, ended, started
from tests.support.clis import CliCall
from tests.support.factories import occupancy_started


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    err = result.stderr + (str(result.exception) if result.exception else "")
    return result.exit_code, result.stdout, err


def _walk(*args: str, limit: int = 2) -> list[list[dict[str, object]]]:
    """Every page of a list command, following the cursor it prints on stderr."""
    pages_seen: list[list[dict[str, object]]] = []
    cursor: list[str] = []
    while True:
        code, out, err = _run(*args, "--limit", str(limit), *cursor)
        assert code == 0, err
        pages_seen.append(json.loads(out))
        more = re.search(r"more: --cursor (\S+)", err)
        if more is None:
            return pages_seen
        cursor = ["--cursor", more.group(1)]
        assert len(pages_seen) < 50, "the cursor never ends"


@pytest.fixture
def one_open(store: PostgresEventStore, cli: CliCall) -> None:
    """occupancy a open since 2026-11-01; b from 2026-11-01 to 2026-11-05 (the clock)."""
    store.append(
        [
            started("a", at("2026-11-01T00:00")),
            started("b", at("2026-11-01T00:00")),
            ended("b", at("2026-11-05T00:00")),
        ]
    )
    catch_up_all(store)  # reads never project: the projector (here, the test) does


def test_usage_to_a_far_future_counts_open_intervals_up_to_the_cluster_clock(
    one_open: None, cli: CliCall
) -> None:
    def usage(*window: str) -> list[dict[str, object]]:
        out = cli("report", "usage", "--group-by", "day", *window, "--format", "json")
        return json.loads(out)  # type: ignore[no-any-return]

    by_clock = usage()
    assert [r["day"] for r in by_clock] == ["2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04"]
    # before: one row per day up to 2100 (9999-12-31 took 39 s and 2.5 GB)
    assert usage("--to", "2100-01-01") == by_clock
    assert usage("--from", "0001-01-01", "--to", "9999-12-31T00:00:00Z") == by_clock
    # a window ending before the clock still ends the open interval there
    assert [r["day"] for r in usage("--to", "2026-11-03")] == ["2026-11-01", "2026-11-02"]
    cost = json.loads(
        cli("report", "cost", "--group-by", "day", "--to", "2100-01-01", "--format", "json")
    )
    assert len(cost) <= 4  # no price book: nothing rated, and surely not 27,000 days


def test_a_report_with_more_rows_than_the_maximum_is_refused(
    one_open: None, cli: CliCall, monkeypatch: pytest.MonkeyPatch
) -> None:
    from projections import pages  # new with the maximum

    monkeypatch.setattr(pages, "MAX_REPORT_ROWS", 3)
    monkeypatch.setattr(finance_reports, "MAX_REPORT_ROWS", 3, raising=False)
    out = cli("report", "usage", "--group-by", "day", ok=False)
    assert "more than 3 rows" in out and "narrow --from/--to" in out, out
    assert len(json.loads(cli("report", "usage", "--group-by", "month", "--format", "json"))) == 1
    cli("project")
    monkeypatch.setattr(pages, "MAX_REPORT_ROWS", 0)
    monkeypatch.setattr(occupancy, "MAX_REPORT_ROWS", 0, raising=False)
    out = cli("report", "occupancy", "--at", "2026-11-02", ok=False)
    assert "more than 0 rows" in out and "group by fewer" in out, out


def test_quota_history_counts_its_steps_before_building_them(
    store: PostgresEventStore, cli: CliCall
) -> None:
    with store.engine.connect() as conn:
        # 175,000 hours: refused by counting, not after building every instant
        with pytest.raises(ValueError, match=r"hours in the window \(at most 100,000\)"):
            series_points(
                conn, "hour", datetime(2000, 1, 1, tzinfo=UTC), datetime(2020, 1, 1, tzinfo=UTC)
            )
        days = series_points(
            conn, "day", datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 3, tzinfo=UTC)
        )
        assert len(days) == 3
    code, _, err = _run(
        "report", "quota-history", "--step", "hour", "--from", "2000-01-01", "--to", "9999-12-31"
    )
    assert code == 1 and "use a longer --step" in err, err


def test_dead_letters_page_with_a_cursor(store: PostgresEventStore, cli: CliCall) -> None:
    with store.transaction() as uow:
        ids = [
            uow.record_dead_letter(
                source="kafka", reason="invalid-schema", error=f"bad {n}", payload=b"{%d" % n
            )
            for n in range(5)
        ]
    walked = _walk("dead-letters", "list", "--json")
    assert [len(p) for p in walked] == [2, 2, 1]
    assert [r["id"] for p in walked for r in p] == ids
    code, _, err = _run("dead-letters", "list", "--limit", "10001")
    assert code != 0 and "10000" in err, err
    code, _, err = _run("dead-letters", "list", "--cursor", "bm9wZQ")
    assert code == 1 and "invalid cursor" in err, err


def test_invoices_credit_notes_and_prices_page_with_a_cursor(
    store: PostgresEventStore, cli: CliCall, tmp_path: Path
) -> None:
    cli("prices", "publish", str(DEMO_BOOK))
    events = []
    for n, ws in enumerate(("ws-a", "ws-b", "ws-c")):
        events += [
            started(f"o{n}", at("2026-11-01T00:00"), workspace=ws),
            ended(f"o{n}", at("2026-11-02T00:00")),
        ]
    store.append(events)
    cli("project")
    cli("billing", "run", "--until", "2026-12-02T00:00:00Z", "--force")
    walked = _walk("invoices", "list", "--format", "json")
    assert [len(p) for p in walked] == [2, 1]
    invoices = [r["invoice_id"] for p in walked for r in p]
    assert [r["workspace"] for p in walked for r in p] == ["ws-a", "ws-b", "ws-c"]
    for n in range(3):
        cli("invoices", "credit", str(invoices[0]), "--amount", f"0.0{n + 1}", "--reason", "x")
    walked = _walk("invoices", "credits", "list", "--format", "json")
    assert [r["amount_minor"] for p in walked for r in p] == [1, 2, 3]
    assert "position" not in walked[0][0]
    later = tmp_path / "later.yaml"
    later.write_text(
        DEMO_BOOK.read_text().replace("demo-2026", "later-2027", 1).replace("2026-", "2027-", 1)
    )
    cli("prices", "publish", str(later))
    walked = _walk("prices", "list", "--format", "json", limit=1)
    assert [r["id"] for p in walked for r in p] == ["demo-2026", "later-2027"]
    code, _, err = _run("invoices", "list", "--limit", "0")
    assert code != 0 and "--limit" in err, err


def test_dead_letters_store_query_pages(store: PostgresEventStore) -> None:
    store.append([occupancy_started(1)])
    with store.transaction() as uow:
        first = uow.record_dead_letter(source="k", reason="r", error="e", payload=b"1")
        second = uow.record_dead_letter(source="k", reason="r", error="e", payload=b"2")
    assert [d.id for d in store.dead_letters(limit=1)] == [first]
    assert [d.id for d in store.dead_letters(after_id=first)] == [second]
