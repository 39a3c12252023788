"""``dlc-ledger replay`` options a newcomer trips on: --format of a bundled trace, the
kafka-python noise in its log."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import typer
from typer.testing import CliRunner

from dlc_ledger.cli import replay as replay_cli
from dlc_ledger.cli.app import app
from dlc_ledger.cli.replay import TraceFormat, trace_format


@pytest.fixture
def restore_logging() -> Iterator[None]:
    selector = logging.getLogger("kafka.net.selector")
    level = selector.level
    yield
    selector.setLevel(level)


def test_a_bundled_trace_names_its_format() -> None:
    assert trace_format("openb", None) is TraceFormat.openb
    assert trace_format("dlrm", None) is TraceFormat.dlrm
    assert trace_format("my.csv", TraceFormat.dlrm) is TraceFormat.dlrm
    assert trace_format("openb+dlrm", None) is TraceFormat.openb_dlrm
    with pytest.raises(typer.BadParameter, match="is a file: pass --format"):
        trace_format("my.csv", None)


def test_replay_needs_no_format_and_quiets_the_kafka_io_loop(
    monkeypatch: pytest.MonkeyPatch, restore_logging: None
) -> None:
    seen: list[str] = []

    def stop_here(trace: str, fmt: str, **_: object) -> None:
        seen.append(fmt)  # the options were accepted: stop before the pipeline starts
        raise ValueError("stopped before replaying")

    monkeypatch.setattr(replay_cli, "run_replay", stop_here)
    result = CliRunner().invoke(app, ["replay", "--trace", "openb"])
    assert "Missing option" not in result.output
    assert seen == ["openb"]
    selector = logging.getLogger("kafka.net.selector")
    assert not selector.isEnabledFor(logging.WARNING)
    assert selector.isEnabledFor(logging.ERROR)
    missing = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["replay", "--trace", "some.csv"])
    assert missing.exit_code == 2 and "pass --format openb or dlrm" in missing.output


def test_a_replay_applies_its_tree_and_book_at_its_start(store: object) -> None:
    """Configuration changes of a replay take effect at the replay's epoch (cluster time),
    not at the wall clock, which may lie in the middle of the replayed history."""
    from datetime import UTC, datetime

    from sqlalchemy import text

    from dlc_ledger.wiring.replay.reference_data import apply_reference_data
    from ledger.store.postgres import PostgresEventStore
    from tests.support.demo_files import DEMO_PRICE_BOOK, DEMO_QUOTAS

    assert isinstance(store, PostgresEventStore)
    epoch = datetime(2026, 11, 1, tzinfo=UTC)
    apply_reference_data(store, DEMO_QUOTAS, DEMO_PRICE_BOOK, epoch, print)
    with store.engine.connect() as conn:
        stamps = conn.execute(
            text("SELECT DISTINCT occurred_at FROM events WHERE source LIKE 'api/%'")
        ).all()
    assert [s for (s,) in stamps] == [epoch]


def test_the_combined_replay_is_the_bundled_traces_only() -> None:
    from dlc_ledger.wiring.replay import load_replay_trace
    from ledger.errors import Invalid

    both = load_replay_trace("openb+dlrm", "openb+dlrm")
    assert both.name == "openb+dlrm" and len(both.instances) == 8152 + 23871
    with pytest.raises(Invalid, match="replays the bundled traces"):
        load_replay_trace("mine.csv", "openb+dlrm")
