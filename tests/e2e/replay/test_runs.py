"""Replay runs and what-if shaping: run databases, the recorded default, the reshaped tree,
the trace window."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
import yaml
from sqlalchemy.engine import make_url

from dlc_ledger.resources import DEMO_QUOTAS
from dlc_ledger.services.yaml_files import load_yaml, parse_quota_tree
from dlc_ledger.wiring.runs import OPEN_LOOP, RunRecord, Runs, create_run_database, run_url
from kubesim.traces import load_openb
from ledger.errors import Invalid, NotFound
from ledger.quotas.model import QuotaTreeError
from ledger.quotas.what_if import reshaped_document
from tests.support.databases import TemplateDatabases

BASE = "postgresql+psycopg://root:secret@127.0.0.1:5432/dlc"


def test_a_run_is_a_database_beside_the_base_one() -> None:
    assert run_url(BASE, OPEN_LOOP) == BASE
    assert make_url(run_url(BASE, "closed-loop")).database == "dlc_closed_loop"
    assert make_url(run_url(BASE, "what-if-fifo")).password == "secret"
    for bad in ("Closed", "1st", "a b", "x" * 40, "drop;table"):
        with pytest.raises(Invalid, match="run name"):
            run_url(BASE, bad)


def test_the_default_run_is_recorded_per_base_database(tmp_path: Path) -> None:
    runs = Runs(tmp_path, BASE)
    assert runs.default() is None and runs.records() == {}
    runs.save(RunRecord("closed-loop", "a closed loop"), make_default=True)
    assert runs.default() == "closed-loop"
    assert "secret" not in (tmp_path / "runs.json").read_text()  # no password on disk
    other = Runs(tmp_path, BASE.replace("/dlc", "/other"))
    assert other.default() is None  # another database has its own record
    runs.set_default(OPEN_LOOP)
    assert runs.default() == OPEN_LOOP
    with pytest.raises(NotFound, match=r"no run named 'what-if-x' .*closed-loop, open-loop"):
        runs.set_default("what-if-x")
    (tmp_path / "runs.json").write_text("{not json")
    with pytest.raises(Invalid, match="cannot read the recorded runs"):
        runs.default()


def test_a_run_database_is_created_once(databases: TemplateDatabases) -> None:
    base = databases.empty()
    url = run_url(base, "what-if-test")
    try:
        assert create_run_database(base, "what-if-test") == url
        assert create_run_database(base, "what-if-test") == url  # there already
        dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == (make_url(url).database,)
    finally:
        databases.drop(url)
        databases.drop(base)


def _demo_tree() -> object:
    return load_yaml(DEMO_QUOTAS.read_text())


def test_a_what_if_puts_every_leaf_queue_under_one_policy() -> None:
    shaped = reshaped_document(_demo_tree(), policy="FIFO")
    tree = parse_quota_tree(yaml.safe_dump(shaped))
    policies = {name: spec.queue_policy for name, spec in tree.specs.items()}
    for leaf in ("ls", "guaranteed", "burstable", "be"):
        assert policies[leaf] == "FIFO", leaf


def test_a_what_if_scales_every_quantity_and_stays_valid() -> None:
    shaped = reshaped_document(_demo_tree(), scale=Decimal("0.25"))
    nodes = {n["name"]: n for n in shaped["quotas"]}
    assert nodes["openb"]["min"]["gpu/any"] == 20_000
    assert nodes["guaranteed"]["lend_limit"] == {"gpu/any": 500}
    assert nodes["burstable"]["max"]["gpu/any"] == 12_000
    parse_quota_tree(yaml.safe_dump(shaped))  # validated like a file
    for bad in (Decimal(0), Decimal(-1), Decimal(5000)):
        with pytest.raises(QuotaTreeError, match="quota scale"):
            reshaped_document(_demo_tree(), scale=bad)


def test_a_trace_window_keeps_its_rows_at_their_own_times() -> None:
    trace = load_openb()
    day = 130 * 86400
    window = trace.between(day, day + 43200)
    assert window.window == (day, day + 43200) and window.end == trace.end
    assert window.instances and all(day <= i.created < day + 43200 for i in window.instances)
    assert len(window.instances) == sum(
        1 for i in trace.instances if day <= i.created < day + 43200
    )
    with pytest.raises(ValueError, match="starts before it ends"):
        trace.between(10, 10)
