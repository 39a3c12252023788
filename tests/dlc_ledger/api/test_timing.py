"""Nothing leaks by time: for a workspace token, a job, event, invoice or quota of another
workspace reads exactly as one that does not exist (issue 37, docs/api.md "Scoping").

Three checks, from the most to the least deterministic, on a seed where another
workspace's job has a long stream and ``job_state`` holds thousands of jobs (so a scope
check that reads another workspace's rows, or scans the jobs, would show):

- the statements: the same SQL text, in the same number and order, for an id of another
  workspace and an absent one (a lookup first, then a second query only when found, would
  differ), and the same answer;
- the rows the database touches running them (``EXPLAIN ANALYZE`` of each captured
  statement with its parameters): the same per table, but for the one index probe that
  finds the row and rejects it by its scope; never the other workspace's events or a scan
  of its jobs;
- the latencies, requests interleaved (own, other, absent in a shuffled order each round):
  the confidence interval of the median paired difference (other minus absent, a
  distribution-free sign-test interval) lies within a generous bound. The bound is wide
  because the machine is shared; the two checks above are the exact ones.
"""

from __future__ import annotations

import gc
import json
import random
import re
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from math import comb
from statistics import median
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, text

from consumers.projector import Projector
from dlc_ledger.api.app import create_app
from dlc_ledger.services.access import create_token
from ledger.events import JobQueued, JobSubmitted
from ledger.store.postgres import PostgresEventStore
from projections.registry import all_projections
from tests.support.api import bearer, seed_world
from tests.support.builders import Narrator, at, replica
from tests.support.databases import TemplateDatabases

#: events on another workspace's (ws-b's) job stream: a scope check on each event row read
#: them all
LONG_STREAM = 20000
#: more ws-b jobs: enough rows that a scan of ``job_state`` would cost, and that the planner
#: probes its indexes
FILLER_JOBS = 3000
ROUNDS = 120


@dataclass(frozen=True)
class Seeded:
    store: PostgresEventStore
    client: TestClient
    headers: dict[str, str]  # a ws-a token
    ids: dict[str, dict[str, str]]  # kind -> own / other / absent -> path value


def _seed_more(store: PostgresEventStore) -> None:
    n = Narrator("timing")
    for i in range(FILLER_JOBS):
        uid = f"fill-{i}"
        n.tell(
            JobSubmitted(job_uid=uid, name=f"fill-{i}", workspace="ws-b", quota="q-ws-b"),
            f"job/{uid}",
            at(i),
        )
    n.tell(
        JobSubmitted(
            job_uid="b-long", name="long", workspace="ws-b", quota="q-ws-b", replicas=(replica(),)
        ),
        "job/b-long",
        at(0),
    )
    for i in range(LONG_STREAM - 1):
        n.tell(JobQueued(job_uid="b-long"), "job/b-long", at(i + 1))
    store.append(n.events)
    Projector(store, all_projections()).catch_up()


@pytest.fixture(scope="module")
def seeded(databases: TemplateDatabases) -> Iterator[Seeded]:
    url = databases.clone()
    store = PostgresEventStore(url)
    try:
        bought = seed_world(store, workspace="ws-b", more=_seed_more)
        secret = create_token(store, ["workspace:ws-a"], name="lead-a", created_by="test")
        with store.engine.connect() as conn:

            def one(sql: str) -> str:
                return str(conn.execute(text(sql)).scalar_one())

            ids = {
                "job": {"own": "a-1", "other": "b-long", "absent": "no-such-job"},
                "job-name": {"own": "train-a-1", "other": "train-b-1", "absent": "train-x-1"},
                "event": {
                    "own": one("SELECT event_id FROM events WHERE stream = 'job/a-1' LIMIT 1"),
                    "other": one("SELECT event_id FROM events WHERE stream = 'job/b-long' LIMIT 1"),
                    "absent": str(uuid.UUID(int=random.Random(37).getrandbits(128))),
                },
                "invoice": {
                    "own": one("SELECT invoice_id FROM billing_invoices WHERE workspace = 'ws-a'"),
                    "other": one(
                        "SELECT invoice_id FROM billing_invoices WHERE workspace = 'ws-b'"
                    ),
                    "absent": "INV-2026-11-ws-x",
                },
                "quota": {"own": "q-ws-a", "other": "q-ws-b", "absent": "q-ws-x"},
                # bought for ws-b; a workspace token reads no subscription (403 by role)
                "group": {"own": "gpu-g2", "other": "gpu-g2", "absent": "no-such-group"},
                "subscription": {"own": bought, "other": bought, "absent": "sub-none"},
            }
            # the four of seed_jobs, the two pending of seed_dispatch, b-long and the filler
            assert one("SELECT count(*) FROM job_state") == str(FILLER_JOBS + 7)
            conn.execute(text("ANALYZE"))  # the planner sees the tables' real sizes
            conn.commit()
        with TestClient(create_app(store), raise_server_exceptions=False) as client:
            yield Seeded(store, client, bearer(secret.secret), ids)
    finally:
        store.close()
        databases.drop(url)


#: every read route that names one thing a workspace token may or may not see:
#: (kind of id, path template)
SCOPED_READS = [
    ("job", "/v1/streams/job/{}/events"),
    ("event", "/v1/events/{}"),
    ("job", "/v1/jobs/{}"),
    ("job-name", "/v1/jobs/{}"),
    ("job", "/v1/jobs/{}/timeline"),
    ("job", "/v1/jobs/{}/why"),
    ("job-name", "/v1/jobs/{}/why"),
    ("invoice", "/v1/invoices/{}"),
    ("quota", "/v1/queues/{}"),
    ("quota", "/v1/quotas/{}/series"),
    ("subscription", "/v1/subscriptions/{}"),
    ("group", "/v1/resource-groups/{}"),
]


@dataclass(frozen=True)
class Executed:
    statement: str
    parameters: Any


@contextmanager
def executed(engine: Engine) -> Iterator[list[Executed]]:
    """The statements ``engine`` runs in the block, as sent to the driver."""
    seen: list[Executed] = []

    def record(
        _conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool
    ) -> None:
        seen.append(Executed(statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _request(seeded: Seeded, template: str, value: str) -> tuple[int, Any, list[Executed]]:
    with executed(seeded.store.engine) as statements:
        response = seeded.client.get(template.format(value), headers=seeded.headers)
    body = response.json()
    if isinstance(body, dict):
        body.pop("freshness", None)
    return response.status_code, json.loads(json.dumps(body).replace(value, "<id>")), statements


@pytest.mark.parametrize(("kind", "template"), SCOPED_READS)
def test_another_workspaces_id_runs_the_statements_of_an_absent_one(
    seeded: Seeded, kind: str, template: str
) -> None:
    ids = seeded.ids[kind]
    _request(seeded, template, ids["absent"])  # warm: token cache, plan caches
    status, body, other = _request(seeded, template, ids["other"])
    absent_status, absent_body, absent = _request(seeded, template, ids["absent"])
    assert (status, body) == (absent_status, absent_body), template
    assert status in (200, 403, 404), (template, body)
    assert [s.statement for s in other] == [s.statement for s in absent], template


def _touched(plan: dict[str, Any], into: Counter[str]) -> None:
    """Rows each table's scans read in ``plan`` (an EXPLAIN ANALYZE node): those they
    returned and those their filters removed, over all loops."""
    relation = plan.get("Relation Name")
    if relation is not None:
        per_loop = (
            plan.get("Actual Rows", 0)
            + plan.get("Rows Removed by Filter", 0)
            + plan.get("Rows Removed by Index Recheck", 0)
        )
        into[relation] += round(per_loop * plan.get("Actual Loops", 0))
    for child in plan.get("Plans", ()):
        _touched(child, into)


def _rows_touched(engine: Engine, statements: list[Executed]) -> list[tuple[str, Counter[str]]]:
    """Each query among ``statements`` and the rows it touches per table, run again."""
    out: list[tuple[str, Counter[str]]] = []
    with engine.connect() as conn:
        for s in statements:
            if not re.match(r"\s*(SELECT|WITH)\b", s.statement, re.IGNORECASE):
                continue
            (plan,) = conn.exec_driver_sql(
                "EXPLAIN (ANALYZE, FORMAT JSON) " + s.statement, s.parameters
            ).scalar_one()
            touched: Counter[str] = Counter()
            _touched(plan["Plan"], touched)
            out.append((s.statement, touched))
        conn.rollback()
    return out


@pytest.mark.parametrize(("kind", "template"), SCOPED_READS)
def test_another_workspaces_rows_are_not_read(seeded: Seeded, kind: str, template: str) -> None:
    """Per statement and table, the rows read for another workspace's id exceed those for
    an absent id by at most the one row an index probe finds and the scope rejects."""
    ids = seeded.ids[kind]
    *_, other = _request(seeded, template, ids["other"])
    *_, absent = _request(seeded, template, ids["absent"])
    engine = seeded.store.engine
    pairs = list(zip(_rows_touched(engine, other), _rows_touched(engine, absent), strict=True))
    for (statement, o), (_, a) in pairs:
        for table in o.keys() | a.keys():
            assert 0 <= o[table] - a[table] <= 1, (template, statement, table, o, a)


def _median_interval(differences: list[float], confidence: float = 0.99) -> tuple[float, float]:
    """A distribution-free interval for the median of ``differences`` (the sign test's:
    order statistics k and n - k + 1, k the largest with P(Binomial(n, 1/2) < k) below
    half the miss rate)."""
    ordered = sorted(differences)
    n = len(ordered)
    tail = (1 - confidence) / 2
    k, below = 0, 0.0
    while below + comb(n, k) / 2**n <= tail:
        below += comb(n, k) / 2**n
        k += 1
    k = max(k, 1)
    return ordered[k - 1], ordered[n - k]


#: routes whose latencies are compared (a stream, an event, a job and its timeline)
TIMED = [
    ("job", "/v1/streams/job/{}/events"),
    ("event", "/v1/events/{}"),
    ("job", "/v1/jobs/{}"),
    ("job", "/v1/jobs/{}/timeline"),
]


@pytest.mark.parametrize(("kind", "template"), TIMED)
def test_another_workspaces_id_takes_as_long_as_an_absent_one(
    seeded: Seeded, kind: str, template: str
) -> None:
    ids = seeded.ids[kind]
    urls = {who: template.format(value) for who, value in ids.items()}
    client, headers = seeded.client, seeded.headers
    shuffle = random.Random(f"timing {template}").shuffle
    seconds: dict[str, list[float]] = {who: [] for who in urls}
    for who in urls:  # warm every path once
        client.get(urls[who], headers=headers)
    gc.collect()
    gc.disable()  # a collection lands on one request at random: noise, not signal
    try:
        for _ in range(ROUNDS):
            order = list(urls)
            shuffle(order)
            for who in order:
                started = time.perf_counter()
                response = client.get(urls[who], headers=headers)
                seconds[who].append(time.perf_counter() - started)
                assert response.status_code in (200, 404), response.text
    finally:
        gc.enable()
    paired = [o - a for o, a in zip(seconds["other"], seconds["absent"], strict=True)]
    low, high = _median_interval(paired)
    absent = median(seconds["absent"])
    # generous: a quarter of the request, at least a millisecond; the leak this closes was
    # as long again as the whole request
    bound = max(0.001, absent / 4)
    summary = (
        f"{template}: medians own {median(seconds['own']) * 1000:.2f} ms, other "
        f"{median(seconds['other']) * 1000:.2f} ms, absent {absent * 1000:.2f} ms; "
        f"other - absent in [{low * 1000:.3f}, {high * 1000:.3f}] ms (99 %), "
        f"bound {bound * 1000:.2f} ms"
    )
    print(summary)
    assert -bound < low and high < bound, summary


@pytest.mark.parametrize(
    ("differences", "expected"),
    [
        ([float(i) for i in range(1, 101)], (37.0, 64.0)),  # n = 100: k = 37 at 99 %
        ([0.0] * 10, (0.0, 0.0)),
    ],
)
def test_the_median_interval_is_the_sign_tests(
    differences: list[float], expected: tuple[float, float]
) -> None:
    assert _median_interval(differences) == expected
