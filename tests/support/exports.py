"""Fixtures of the export and restore tests: a seeded store, made once per module, with
jobs, a quota tree, a price book, a subscription, a budget crossed, nodes, dispatch
decisions, usage rated and invoices issued, through the services the CLI uses; and its
export."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.api_world import job_events, quota_yaml
from dlc_ledger.resources import DEMO_PRICE_BOOK
from dlc_ledger.services.billing import publish_price_book, tick
from dlc_ledger.services.budgets import apply_budget_file
from dlc_ledger.services.budgets import check as budget_check
from dlc_ledger.services.quotas import apply_quota_file
from dlc_ledger.services.store import export_store
from dlc_ledger.services.subscriptions import purchase
from dlc_ledger.services.yaml_files import parse_price_book
from ledger.envelopes import Envelope, make_envelope
from ledger.events import AdmissionDecided, NodeRegistered
from ledger.ids import fact_event_id
from ledger.store.postgres import PostgresEventStore
from tests.support.databases import TemplateDatabases

#: the world's cluster clock (bench/api_world.py: four months of jobs from August)
EPOCH = datetime(2026, 8, 1, tzinfo=UTC)
JOBS = 120
PER_FILE = 250


@dataclass(frozen=True)
class Seeded:
    url: str
    store: PostgresEventStore


def seed(store: PostgresEventStore) -> None:
    """A few months of a small cluster, billed: every read model projected to the head."""
    publish_price_book(store, parse_price_book(DEMO_PRICE_BOOK.read_text()), at=EPOCH)
    apply_quota_file(store, quota_yaml(), principal="test", at=EPOCH)
    purchase(
        store,
        group="gpu-g2",
        spec="ml.g2.8xlarge",
        nodes=2,
        term="month",
        workspace="ws-0-0-0",
        principal="test",
        auto_renew=True,
        at=datetime(2026, 8, 10, tzinfo=UTC),
    )
    apply_budget_file(store, BUDGETS, principal="test", at=EPOCH)
    store.append([_node(n) for n in range(4)])
    events = list(job_events(JOBS))
    for start in range(0, len(events), 200):  # appends of several sizes, as ingest makes
        store.append(events[start : start + 200])
    store.append([_admission(uid) for uid in ("job-00000000", "job-00000001")])
    end = datetime(2026, 12, 3, tzinfo=UTC)
    tick(store, end)  # rates, closes Aug-Nov, invoices
    assert budget_check(store, datetime(2026, 9, 30, 23, tzinfo=UTC))  # a crossing stored


BUDGETS = """
budgets:
  - {workspace: ws-0-0-0, amount: "50.00", currency: USD, period: month, action: notify}
"""


def _node(n: int) -> Envelope:
    name = f"node-{n:03d}"
    return make_envelope(
        NodeRegistered(node=name, pool="a100", gpus=8, cpu_milli=96_000, memory_mib=786_432),
        event_id=fact_event_id("test", "Node", name, "registered"),
        stream=f"node/{name}",
        occurred_at=EPOCH,
        observed_at=EPOCH,
        source="kube-watcher/test",
    )


def _admission(uid: str) -> Envelope:
    return make_envelope(
        AdmissionDecided(job_uid=uid, quota="team-0-0", outcome="admit"),
        event_id=fact_event_id("test", "Decision", uid, "admit"),
        stream="quota/team-0-0",
        occurred_at=EPOCH,
        observed_at=EPOCH,
        source="dispatcher/test",
    )


@pytest.fixture(scope="module")
def seeded(databases: TemplateDatabases) -> Iterator[Seeded]:
    url = databases.clone()
    store = PostgresEventStore(url)
    seed(store)
    yield Seeded(url, store)
    store.close()
    databases.drop(url)


@pytest.fixture(scope="module")
def exported(seeded: Seeded, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seeded store's export (read-only for the tests: copy it to tamper)."""
    to = tmp_path_factory.mktemp("export") / "ledger"
    export_store(seeded.store, to, per_file=PER_FILE)
    return to
