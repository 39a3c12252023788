"""Quota projection: invariants at every change point, --at queries, determinism."""

from __future__ import annotations

import contextlib
import random
from collections import defaultdict, deque
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import chain, cycle, repeat

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection, text

from consumers.projector import Projector
from dlc_ledger.services.yaml_files import parse_quota_tree
from ledger.envelopes import Envelope
from ledger.events import JobAdmitted, JobPreempted, JobStarted, JobSucceeded
from ledger.quotas import NO_QUOTA
from ledger.store.base import RecordedEvent, UnitOfWork
from ledger.store.postgres import PostgresEventStore
from projections.quotas.buckets import day_of, hour_of
from projections.quotas.projection import QuotaProjection
from projections.quotas.reads import _raw_at, usage_at, usage_history
from tests.support.databases import TemplateDatabases
from tests.support.quotas import (
    at,
    check_invariants,
    dump_tables,
    history,
    occ_ended,
    occ_started,
    states,
    submitted,
    transition,
    tree_events,
)
from tests.support.tables import net_quota_changes

TREE = parse_quota_tree(
    """
- {name: root, min: {gpu/any: 6000, cpu: 40000, memory: 65536}}
- {name: mid, parent: root, min: {gpu/any: 3000, cpu: 16000, memory: 32768}}
- {name: a, parent: mid, min: {gpu/any: 1000, cpu: 8000, memory: 16384}, workspaces: [ws-a],
   lend_limit: {gpu/any: 500}}
- {name: b, parent: mid, min: {gpu/any: 1000, cpu: 4000}, max: {gpu/any: 5000}, workspaces: [ws-b]}
- {name: c, parent: root, min: {gpu/any: 2000, cpu: 8000}, workspaces: [ws-c]}
"""
)
# b also names gpu/A100: its jobs' A100 usage counts there, a's as gpu/any
CHANGED = parse_quota_tree(
    """
- {name: root, min: {gpu/any: 6000, gpu/A100: 1000, cpu: 40000, memory: 65536}}
- {name: mid, parent: root, min: {gpu/any: 3000, gpu/A100: 1000, cpu: 16000, memory: 32768}}
- {name: a, parent: mid, min: {gpu/any: 1000, cpu: 8000, memory: 16384}, workspaces: [ws-a],
   lend_limit: {gpu/any: 500}}
- {name: b, parent: mid, min: {gpu/any: 2000, gpu/A100: 1000, cpu: 4000},
   max: {gpu/any: 2000}, workspaces: [ws-b]}
"""
)
A100 = "gpu/A100"


def _flavor(n: int) -> str:
    """Job ``n``'s pods land on A100 nodes when n % 4 == 3 (it asks for gpu/any)."""
    return A100 if n % 4 == 3 else "gpu/any"


WORKSPACES = ("ws-a", "ws-b", "ws-c", "ws-unbound")

actions = st.lists(
    st.tuples(
        # resubmit / reobserve: the same JobSubmitted / OccupancyStarted again under another
        # event id (a re-submission, a watcher re-observation); retree: apply CHANGED (c
        # deleted, b resized) or back to TREE
        st.sampled_from(
            ["submit", "start", "end", "preempt", "succeed", "resubmit", "reobserve", "retree"]
        ),
        st.integers(0, 11),  # job number
        st.sampled_from(WORKSPACES),
        st.sampled_from(["public", "idle"]),
        # time step in seconds (0: same instant as the previous event; the long ones
        # cross hours and days, so reads sum whole days' and hours' sums as well as
        # change rows)
        st.sampled_from([0, 1, 2, 3, 1_800, 4_000, 90_000]),
        st.booleans(),  # late: stamp 5 s in the past
    ),
    min_size=1,
    max_size=40,
)


def _events(
    steps: list[tuple[str, int, str, str, int, bool]],
) -> tuple[list[Envelope], dict[str, dict[str, int]]]:
    """Events for ``steps`` and the expected final usage (reported quota -> flavor -> used,
    ``gpu/A100`` counted as such only where the latest tree names it for the quota)."""
    out: list[Envelope] = tree_events(TREE, at(0))
    tree = TREE
    clock = 10.0
    jobs: dict[int, tuple[str, str, str, str]] = {}  # n -> (uid, workspace, mode, quota)
    open_pods: dict[int, str] = {}
    expected: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    serial = 0
    latest = (at(0), TREE)  # the tree whose events are latest in cluster time
    for kind, n, ws, mode, step, late in steps:
        clock += step
        when = at(clock - 5 if late else clock)
        if kind == "retree":
            new = CHANGED if tree is TREE else TREE
            out.extend(tree_events(new, when, current=tree))
            tree = new
            if when >= latest[0]:
                latest = (when, new)
            continue
        if kind == "submit" and n not in jobs:
            jobs[n] = (f"job-{n}", ws, mode, tree.bindings.get(ws, NO_QUOTA))
            out.append(submitted(f"job-{n}", ws, when, mode=mode, mgpu=500 * (n % 3 + 1)))
            continue
        if n not in jobs:
            continue
        uid, ws, mode, quota = jobs[n]
        mgpu = 500 * (n % 3 + 1)
        if kind == "resubmit":
            out.append(submitted(uid, ws, when, mode=mode, mgpu=mgpu))
        elif kind == "reobserve" and n in open_pods:
            out.append(
                occ_started(open_pods[n], uid, ws, when, mode=mode, mgpu=mgpu, flavor=_flavor(n))
            )
        elif kind == "start" and n not in open_pods:
            serial += 1
            open_pods[n] = f"pod-{n}-{serial}"
            out.append(transition(JobStarted, uid, when))
            out.append(
                occ_started(open_pods[n], uid, ws, when, mode=mode, mgpu=mgpu, flavor=_flavor(n))
            )
            expected[quota][_flavor(n)] += mgpu
            expected[quota]["cpu"] += 4000
        elif kind == "end" and n in open_pods:
            out.append(occ_ended(open_pods.pop(n), uid, when))
            expected[quota][_flavor(n)] -= mgpu
            expected[quota]["cpu"] -= 4000
        elif kind == "preempt":
            out.append(transition(JobPreempted, uid, when))
        elif kind == "succeed":
            out.append(transition(JobSucceeded, uid, when))
    reported: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for quota, per in expected.items():  # usage of a deleted quota is reported under "-"
        for flavor, used in per.items():
            if flavor == A100 and not (quota == "b" and latest[1] is CHANGED):
                flavor = "gpu/any"
            reported[quota if quota in latest[1].specs else NO_QUOTA][flavor] += used
    return out, reported


class _Boom(Exception):
    """A page that fails after the projection wrote its rows (the runner rolls it back)."""


class _FlakyQuotaProjection(QuotaProjection):
    def __init__(self, failures: Iterator[bool]) -> None:
        self.failures = failures

    def apply(self, uow: UnitOfWork, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        super().apply(uow, conn, events)
        if next(self.failures):
            raise _Boom


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=actions,
    pages=st.lists(st.integers(1, 12), min_size=1, max_size=8),
    failures=st.lists(st.booleans(), max_size=12),
)
def test_invariants_hold_and_any_paging_equals_a_rebuild(
    databases: TemplateDatabases,
    steps: list[tuple[str, int, str, str, int, bool]],
    pages: list[int],
    failures: list[bool],
) -> None:
    url = databases.clone()
    store = PostgresEventStore(url)
    try:
        events, expected = _events(steps)
        store.append(events)
        # incrementally, in pages of random sizes, some of which fail and roll back
        flaky = _FlakyQuotaProjection(chain(failures, repeat(False)))
        projector = Projector(store, [flaky])
        head = store.head_position()
        sizes = cycle(pages)
        while projector.position(flaky) < head:
            projector.page_size = next(sizes)
            with contextlib.suppress(_Boom):
                projector.step(flaky)
        rows = history(store)
        for _, state in states(rows):
            check_invariants(TREE.specs, state)
        final = states(rows)[-1][1]
        for quota in ("a", "b", "c", NO_QUOTA):
            for flavor in ("gpu/any", A100, "cpu"):
                row = final.get((quota, flavor))
                assert (row.used if row else 0) == expected[quota][flavor], (quota, flavor)
        projector.maintain([flaky])  # the rollups, as a catch-up ends with
        incremental = dump_tables(store)
        # projections are disposable: a rebuild (in one page) gives identical rows
        projection = QuotaProjection()
        Projector(store, [projection], page_size=1000).rebuild(projection)
        assert dump_tables(store) == incremental
    finally:
        store.close()
        databases.drop(url)


def _usage(store: PostgresEventStore, when: datetime | None) -> dict[tuple[str, str], object]:
    with store.engine.connect() as conn:
        return {(r.quota, r.flavor): r for r in usage_at(conn, when)}


def test_usage_at_an_instant_before_and_after_changes(store: PostgresEventStore) -> None:
    store.append(
        [
            *tree_events(TREE, at(0)),
            submitted("j1", "ws-b", at(10), mgpu=2500, cpu=1000, memory=0),
            transition(JobAdmitted, "j1", at(20)),
            occ_started("p1", "j1", "ws-b", at(20), mgpu=2500, cpu=1000, memory=0),
        ]
    )
    changed = parse_quota_tree(
        """
- {name: root, min: {gpu/any: 6000, cpu: 40000, memory: 65536}}
- {name: mid, parent: root, min: {gpu/any: 3000, cpu: 16000, memory: 32768}}
- {name: a, parent: mid, min: {gpu/any: 1000, cpu: 8000, memory: 16384}, workspaces: [ws-a],
   lend_limit: {gpu/any: 500}}
- {name: b, parent: mid, min: {gpu/any: 2000, cpu: 4000}, max: {gpu/any: 2000},
   workspaces: [ws-b]}
"""
    )
    store.append(tree_events(changed, at(50), current=TREE))
    store.append([occ_ended("p1", "j1", at(100)), transition(JobSucceeded, "j1", at(100))])
    Projector(store, [QuotaProjection()]).catch_up()

    queued = _usage(store, at(15))[("b", "gpu/any")]
    assert (queued.used, queued.queued, queued.queued_jobs) == (0, 2500, 1)  # type: ignore[attr-defined]
    before = _usage(store, at(30))
    b = before[("b", "gpu/any")]
    assert (b.min, b.used, b.borrowed, b.queued, b.running_jobs) == (1000, 2500, 1500, 0, 1)  # type: ignore[attr-defined]
    assert before[("a", "gpu/any")].lent == 500  # type: ignore[attr-defined]  # its lend limit
    assert before[("mid", "gpu/any")].lent == 1000  # type: ignore[attr-defined]  # its shared pool
    assert before[("root", "gpu/any")].lent == 0  # type: ignore[attr-defined]
    assert ("c", "gpu/any") in before
    after = _usage(store, at(60))  # b's min raised to 2000, max cut to 2000: over-admitted
    b = after[("b", "gpu/any")]
    assert (b.min, b.max, b.used, b.borrowed, b.over_admitted) == (2000, 2000, 2500, 500, 500)  # type: ignore[attr-defined]
    assert ("c", "gpu/any") not in after  # deleted
    done = _usage(store, at(100))[("b", "gpu/any")]
    assert (done.used, done.running_jobs) == (0, 0)  # type: ignore[attr-defined]
    latest, far = _usage(store, None), _usage(store, at(1000))
    assert {k: replace(v, at=at(100)) for k, v in far.items()} == latest  # type: ignore[type-var]
    assert {r.at for r in latest.values()} == {at(100)}  # type: ignore[attr-defined]  # last change
    assert _usage(store, at(-1)) == {}
    with store.engine.connect() as conn:  # one quota only: the same rows as in the full set
        only_b = usage_at(conn, at(30), quota="b")
        assert only_b == [r for r in usage_at(conn, at(30)) if r.quota == "b"] and only_b


def test_jobs_of_unbound_workspaces_count_under_dash(store: PostgresEventStore) -> None:
    store.append(
        [
            *tree_events(TREE, at(0)),
            submitted("j1", "ws-nowhere", at(1), mgpu=700),
            occ_started("p1", "j1", "ws-nowhere", at(2), mgpu=700),
        ]
    )
    Projector(store, [QuotaProjection()]).catch_up()
    row = _usage(store, None)[(NO_QUOTA, "gpu/any")]
    assert (row.used, row.borrowed, row.running_jobs) == (700, 0, 1)  # type: ignore[attr-defined]
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT quota FROM quota_jobs")).scalar() == NO_QUOTA


def test_usage_at_does_not_depend_on_arrival_order(store: PostgresEventStore) -> None:
    """Kafka orders events per job only: a pod's start may be stored after a later one's."""
    store.append(tree_events(TREE, at(0)))
    store.append(
        [
            submitted("j2", "ws-b", at(50), mgpu=1000, cpu=0, memory=0),
            occ_started("p2", "j2", "ws-b", at(50), mgpu=1000, cpu=0, memory=0),
        ]
    )
    # j1's events arrive afterwards, from another partition, though they happened earlier
    store.append(
        [
            submitted("j1", "ws-b", at(10), mgpu=2500, cpu=0, memory=0),
            occ_started("p1", "j1", "ws-b", at(20), mgpu=2500, cpu=0, memory=0),
            occ_ended("p1", "j1", at(40)),
        ]
    )
    Projector(store, [QuotaProjection()]).catch_up()
    during = _usage(store, at(30))[("b", "gpu/any")]
    assert (during.used, during.borrowed) == (2500, 1500)  # type: ignore[attr-defined]
    assert _usage(store, at(30))[("root", "gpu/any")].used == 2500  # type: ignore[attr-defined]
    later = _usage(store, at(60))[("b", "gpu/any")]
    assert (later.used, later.borrowed) == (1000, 0)  # type: ignore[attr-defined]


def _interleave(events: list[Envelope], rnd: random.Random) -> list[Envelope]:
    """Another arrival order Kafka could deliver: each job's events keep their order,
    jobs interleave at random; tree and binding events stay where they were."""
    out: list[Envelope] = []
    segment: dict[str, deque[Envelope]] = {}

    def flush() -> None:
        while segment:
            stream = rnd.choice(sorted(segment))
            out.append(segment[stream].popleft())
            if not segment[stream]:
                del segment[stream]

    for event in events:
        if event.stream.startswith("job/"):
            segment.setdefault(event.stream, deque()).append(event)
        else:
            flush()
            out.append(event)
    flush()
    return out


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=actions, seed=st.integers(0, 2**16), cut=st.floats(0, 1), span=st.floats(0, 1))
def test_history_does_not_depend_on_arrival_order_and_windows_slice_it(
    databases: TemplateDatabases,
    steps: list[tuple[str, int, str, str, int, bool]],
    seed: int,
    cut: float,
    span: float,
) -> None:
    events, _ = _events(steps)
    histories = []
    for order in (events, _interleave(events, random.Random(seed))):
        url = databases.clone()
        store = PostgresEventStore(url)
        try:
            store.append(order)
            Projector(store, [QuotaProjection()], page_size=7).catch_up()
            with store.engine.connect() as conn:
                full = usage_history(conn)
                histories.append(full)
                times = sorted({e.occurred_at for e in events})
                since = times[int(cut * (len(times) - 1))]
                until = times[min(len(times) - 1, int((cut + span) * (len(times) - 1)))]
                window = usage_history(conn, since=since, until=until)
                assert [r for r in window if r.at > since] == [
                    r for r in full if since < r.at <= until
                ]
                start = {(r.quota, r.flavor): r for r in window if r.at == since}
                assert start == {(r.quota, r.flavor): r for r in usage_at(conn, since)}
                for flavor, quota in (("gpu/any", "a"), ("gpu/any", "b"), (A100, "b")):
                    gpu = usage_history(conn, since=since, until=until, flavor=flavor, quota=quota)
                    assert gpu == [r for r in window if r.flavor == flavor and r.quota == quota]
                # an instant's raw usage reads the same from the start or back from the end
                for when in (times[0] - timedelta(seconds=1), *times):
                    for only in (None, ["gpu/any", A100]):
                        ahead = sorted(map(tuple, _raw_at(conn, when, only, from_end=False)))
                        back = sorted(map(tuple, _raw_at(conn, when, only, from_end=True)))
                        assert ahead == back, (when, only)
        finally:
            store.close()
            databases.drop(url)
    assert histories[0] == histories[1]


def test_an_instant_reads_the_same_sums_from_either_end_across_days_and_hours(
    databases: TemplateDatabases,
) -> None:
    """Raw usage at every instant next to a change or a day's or hour's edge, read forward
    (days, hours, then change rows up to it) and back from the running totals, equals the
    change rows summed one by one."""
    day = 86_400
    events = [
        *tree_events(TREE, at(0)),
        submitted("j1", "ws-a", at(100), mgpu=1000),
        occ_started("p1", "j1", "ws-a", at(200), mgpu=1000),
        submitted("j2", "ws-b", at(day - 1), mgpu=500),
        occ_started("p2", "j2", "ws-b", at(day + 10), mgpu=500),
        occ_started("p3", "j2", "ws-b", at(day + 3_600), mgpu=500),
        occ_ended("p1", "j1", at(2 * day + 5)),
        occ_ended("p2", "j2", at(day)),  # late: before its start, clamped to it
        occ_ended("p3", "j2", at(3 * day + 7_200)),
    ]
    url = databases.clone()
    store = PostgresEventStore(url)
    try:
        store.append(events)
        Projector(store, [QuotaProjection()], page_size=4).catch_up()
        edges = {at(n * 3_600) for n in range(4 * 24)}
        times = {e.occurred_at for e in events} | edges
        instants = sorted(times | {t - timedelta(microseconds=1) for t in times})
        with store.engine.connect() as conn:
            changes = net_quota_changes(conn)
            for when in instants:
                expected: dict[tuple[str, str], list[int]] = {}
                for changed_at, quota, flavor, *raw in changes:
                    if changed_at <= when:
                        sums = expected.setdefault((quota, flavor), [0] * len(raw))
                        sums[:] = [a + b for a, b in zip(sums, raw, strict=True)]
                want = {k: v for k, v in expected.items() if any(v)}
                for from_end in (False, True):
                    got = {
                        (r[0], r[1]): list(r[2:])
                        for r in _raw_at(conn, when, None, from_end=from_end)
                        if any(r[2:])
                    }
                    assert got == want, (when, from_end)
    finally:
        store.close()
        databases.drop(url)


@pytest.mark.parametrize(
    "instant",
    [
        "2026-11-01T00:59:59.999999+00:00",  # the last microsecond of an hour
        "2026-11-01T01:00:00+00:00",
        "2026-11-01T06:29:59.999999+05:30",  # an offset that is not whole hours
        "2026-11-01T23:59:59.999999+00:00",  # the last microsecond of a day
        "2026-11-02T03:00:00+05:30",  # the day before in UTC
        "1969-12-31T23:30:00+00:00",  # before the epoch: floored, not truncated
    ],
)
def test_an_instant_falls_in_the_utc_hour_and_day_that_hold_it(instant: str) -> None:
    """Writes and reads bucket changes into quota_change_hours and quota_change_days
    through the same hour and day."""
    at = datetime.fromisoformat(instant)
    hour, day = hour_of(at), day_of(at)
    utc = at.astimezone(UTC)
    assert hour == utc.replace(minute=0, second=0, microsecond=0)
    assert hour <= at < hour + timedelta(hours=1)
    assert day == utc.replace(hour=0, minute=0, second=0, microsecond=0)
    assert day <= hour < day + timedelta(days=1)


def test_a_job_ended_before_its_start_arrived_counts_as_running_while_it_occupies(
    store: PostgresEventStore,
) -> None:
    """The job watcher's end is stored before the pod watcher's start: the job still ran
    from 20 to 40 (regression: it stayed queued, its usage with it)."""
    store.append(tree_events(TREE, at(0)))
    store.append(
        [
            submitted("j1", "ws-b", at(10), mgpu=800, cpu=0, memory=0),
            transition(JobSucceeded, "j1", at(40)),
            transition(JobStarted, "j1", at(20)),
            occ_started("p1", "j1", "ws-b", at(20), mgpu=800, cpu=0, memory=0),
            occ_ended("p1", "j1", at(40)),
        ]
    )
    Projector(store, [QuotaProjection()], page_size=2).catch_up()

    def figures(second: float) -> tuple[int, int, int, int]:
        row = _usage(store, at(second)).get(("b", "gpu/any"))
        return (row.used, row.queued, row.running_jobs, row.queued_jobs) if row else (0, 0, 0, 0)  # type: ignore[attr-defined]

    assert figures(15) == (0, 800, 0, 1)
    assert figures(30) == (800, 0, 1, 0)
    assert figures(40) == (0, 0, 0, 0)


def test_a_job_waits_again_between_its_pods(store: PostgresEventStore) -> None:
    """Preempted at 30, its next pod bound at 50: queued in between, whatever order the
    pods' events arrive in; a JobPreempted alone changes nothing while its pod occupies."""
    store.append(tree_events(TREE, at(0)))
    store.append(
        [
            submitted("j1", "ws-a", at(10), mgpu=600, cpu=0, memory=0),
            occ_started("p2", "j1", "ws-a", at(50), mgpu=600, cpu=0, memory=0),
            occ_started("p1", "j1", "ws-a", at(20), mgpu=600, cpu=0, memory=0),
            transition(JobPreempted, "j1", at(25)),
            occ_ended("p1", "j1", at(30)),
            transition(JobSucceeded, "j1", at(70)),
            occ_ended("p2", "j1", at(70)),
        ]
    )
    Projector(store, [QuotaProjection()], page_size=3).catch_up()
    expected = {15: (0, 1), 20: (1, 0), 27: (1, 0), 30: (0, 1), 49: (0, 1), 50: (1, 0), 70: (0, 0)}
    for second, counts in expected.items():
        row = _usage(store, at(second))[("a", "gpu/any")]
        assert (row.running_jobs, row.queued_jobs) == counts, second  # type: ignore[attr-defined]
        assert row.queued == 600 * counts[1], second  # type: ignore[attr-defined]
