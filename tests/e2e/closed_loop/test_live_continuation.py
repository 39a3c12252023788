"""One world: a slice of openb's history played open loop, then a live copy of its last
hour played closed loop through the real pipeline and the live dispatcher, in one database,
on one kubesim cluster, against one quota tree (``run_replay(..., live_from=...)``).

The history (the rows created in the 12 hours before ``W``, a day before the trace's end)
must be exact per workspace against the trace up to the live instant; the live rows (the
copies, ``-live``) arrive suspended and only the dispatcher starts them; no decision is
stored before the live instant, and every admission is a live row's (or a history row's
the dispatcher itself preempted first). Some history rows still run at the live instant,
to their trace deletion, and hold the quota tree's capacity: a live copy waits for them,
or (a tighter tree) preempts them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

from dlc_ledger.wiring.replay import ReplaySummary, run_replay
from kubesim.traces import Trace, TraceInstance, live_rows, load_openb
from ledger.store.postgres import PostgresEventStore
from tests.support.clis import CliCall
from tests.support.live_replays import replay_closed_loop, stored_events

HOUR = 3600

#: the history's running rows at the live instant hold 9 GPUs of burstable and ~1.26 of
#: best-effort (borrowed); 11 GPUs in all and 1 guaranteed to ls: the first live ls job
#: reclaims from a best-effort history row
TIGHT_TREE = """
quotas:
  - name: openb
    min: {gpu/any: 11000}
  - name: ls
    parent: openb
    min: {gpu/any: 1000}
    preemption: {within_quota: LowerPriority, reclaim: Any}
    workspaces: [ws-ls]
  - name: burstable
    parent: openb
    min: {gpu/any: 9000}
    max: {gpu/any: 9000}
    preemption: {within_quota: LowerPriority, reclaim: LowerPriority}
    workspaces: [ws-burstable]
  - name: be
    parent: openb
    max: {gpu/any: 16000}
    preemption: {within_quota: Never, reclaim: Never}
    workspaces: [ws-be]
"""


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


@dataclass
class World:
    """A replay of history then live, and what the store holds of it."""

    trace: Trace
    history: Trace
    live_names: set[str]
    live_from: datetime
    running_at: list[TraceInstance]  # history rows running at the live instant
    summary: ReplaySummary
    submitted: dict[str, str]  # job uid -> name
    decisions: list[Any]
    victims: set[str]  # job uids
    admitted_at: dict[str, datetime]  # job uid -> first admission

    def at(self, seconds: int) -> datetime:
        return self.trace.epoch + timedelta(seconds=seconds)


def _replay(store: PostgresEventStore, bootstrap: str, tmp_path: Path, tree: str) -> World:
    openb = load_openb()
    w = (openb.end - 24 * HOUR) // HOUR * HOUR
    history = openb.between(w - 12 * HOUR, w)
    # the live copy of the last hour starts at w: after every creation of the history
    trace = live_rows(history, (w - HOUR, w), at=w)
    live_names = {i.job_name for i in trace.instances[len(history.instances) :]}
    running_at = [
        i
        for i in history.instances
        if i.scheduled is not None and i.scheduled < w < (i.deleted or trace.end)
    ]
    assert len(history.instances) > 300 and len(live_names) > 20 and running_at
    live_from = trace.epoch + timedelta(seconds=w)
    summary = replay_closed_loop(store, bootstrap, tmp_path, trace, tree, live_from, within=90)
    decisions = stored_events(store, "AdmissionDecided", "PreemptionDecided")
    admitted_at: dict[str, datetime] = {}
    for e in decisions:
        if e.type == "AdmissionDecided" and e.data["outcome"] == "admit":
            admitted_at.setdefault(e.data["job_uid"], e.occurred_at)
    return World(
        trace,
        history,
        live_names,
        live_from,
        running_at,
        summary,
        {e.data["job_uid"]: e.data["name"] for e in stored_events(store, "JobSubmitted")},
        decisions,
        {
            v["job_uid"]
            for e in decisions
            if e.type == "PreemptionDecided"
            for v in e.data["victims"]
        },
        admitted_at,
    )


def _check_one_world(world: World, store: PostgresEventStore) -> None:
    """What holds whatever the tree: the history exact to the live instant, the live part a
    closed loop of the copies, one database, decisions only from the live instant on."""
    summary, submitted = world.summary, world.submitted
    assert summary.ok and summary.mismatches == [] and summary.dead_letters == 0
    assert summary.workspaces_checked >= 3 and summary.instances == len(world.history.instances)
    figures = summary.closed_loop
    assert figures is not None and figures.jobs == len(world.live_names)
    assert figures.admitted > 0 and figures.never_admitted == 0
    names = set(submitted.values())
    assert world.live_names <= names and {i.job_name for i in world.history.instances} <= names
    assert world.decisions and min(e.occurred_at for e in world.decisions) >= world.live_from
    admitted = set(world.admitted_at)
    assert {submitted[u] for u in admitted - world.victims} <= world.live_names
    assert {submitted[u] for u in admitted} & world.live_names
    # a live row runs only once admitted
    for e in stored_events(store, "OccupancyStarted"):
        if submitted[e.data["job_uid"]] in world.live_names:
            assert e.occurred_at >= world.admitted_at[e.data["job_uid"]]


def _runs(store: PostgresEventStore, world: World) -> dict[str, list[tuple[str, str | None]]]:
    """job name -> its occupancies (started, ended or None), in order."""
    ended = {e.data["occupancy_id"]: e.data for e in stored_events(store, "OccupancyEnded")}
    out: dict[str, list[tuple[str, str | None]]] = {}
    for e in stored_events(store, "OccupancyStarted"):
        end = ended.get(e.data["occupancy_id"])
        out.setdefault(world.submitted[e.data["job_uid"]], []).append(
            (e.data["started_at"], None if end is None else end["ended_at"])
        )
    return out


def test_history_open_loop_then_a_live_copy_under_the_dispatcher(
    store: PostgresEventStore, bootstrap: str, tmp_path: Path
) -> None:
    # closed-loop.yaml, burstable capped at 9 GPUs: the history's two burstable rows
    # running at the live instant (8 + 1 GPUs) hold it all, so the live burstable copy
    # waits for the end of one of them
    shipped = (files("dlc_ledger.resources") / "quotas" / "closed-loop.yaml").read_text()
    tree = shipped.replace("max: {gpu/any: 12000}", "max: {gpu/any: 9000}")
    assert tree != shipped
    world = _replay(store, bootstrap, tmp_path, tree)
    _check_one_world(world, store)
    assert not world.victims

    # the history's rows running at the live instant run on to their trace deletion
    runs = _runs(store, world)
    for inst in world.running_at:
        assert runs[inst.job_name] == [
            (_iso(world.at(inst.scheduled or 0)), _iso(world.at(inst.deleted or 0)))
        ]

    # the history's occupancy counts in the one quota tree: the burstable copy is admitted
    # at the first cycle after a history row of its quota ended, not at its arrival
    burstable = [i for i in world.running_at if i.workspace == "ws-burstable"]
    assert sum(i.gpu_milli for i in burstable) == 9000
    freed = world.at(min(i.deleted or world.trace.end for i in burstable))
    (waiting,) = [
        i
        for i in world.trace.instances
        if i.job_name in world.live_names and i.workspace == "ws-burstable"
    ]
    (admission,) = [
        at for uid, at in world.admitted_at.items() if world.submitted[uid] == waiting.job_name
    ]
    assert freed <= admission < freed + timedelta(seconds=120)
    assert admission > world.at(waiting.created + 60)


def test_a_live_job_preempts_a_history_row_which_resumes_as_its_trace_runs(
    store: PostgresEventStore, bootstrap: str, tmp_path: Path
) -> None:
    world = _replay(store, bootstrap, tmp_path, TIGHT_TREE)
    _check_one_world(world, store)
    history_victims = {
        world.submitted[u] for u in world.victims if world.submitted[u] not in world.live_names
    }
    assert history_victims, "a live job reclaimed from a best-effort history row"
    runs = _runs(store, world)
    by_name = {i.job_name: i for i in world.history.instances}
    for name in history_victims:
        inst = by_name[name]
        assert inst.workspace == "ws-be" and inst in world.running_at
        occupancies = runs[name]
        print(name, inst.scheduled, inst.deleted, occupancies)
        # its run from the trace's start to the preemption, after the live instant
        assert occupancies[0][0] == _iso(world.at(inst.scheduled or 0))
        first_end = occupancies[0][1]
        assert first_end is not None and first_end >= _iso(world.live_from)
        # admitted again, it ran as its trace row still did: to its deletion at the latest
        for started, ended in occupancies[1:]:
            assert ended is not None and started < ended <= _iso(world.at(inst.deleted or 0))
    # the ones resumed before their deletion: admitted by the dispatcher, ran to it
    resumed = {world.submitted[u] for u in world.admitted_at} & history_victims
    assert all(runs[n][-1][1] == _iso(world.at(by_name[n].deleted or 0)) for n in resumed)


def test_the_live_option_refuses_what_it_cannot_do(cli: CliCall) -> None:
    tree = "dlc_ledger/resources/quotas/closed-loop.yaml"
    cases = [
        (["--live", "2027-03-29T07:00Z"], "FROM/TO"),
        (["--live", "2027-03-29T07:00Z/2027-03-29T08:00Z"], "--closed-loop"),
        (["--live", "2020-01-01T00:00Z/2020-01-02T00:00Z", "--closed-loop", "--quotas", tree],
         "start at or after"),
        (["--live", "2028-01-01T00:00Z/2028-01-02T00:00Z", "--closed-loop", "--quotas", tree],
         "no trace row"),
    ]  # fmt: skip
    for args, message in cases:
        out = cli("replay", "--trace", "openb", *args, ok=False)
        assert message in out, (args, out)


def test_a_live_window_is_copied_after_the_trace_and_played_live_there(
    store: PostgresEventStore, bootstrap: str, tmp_path: Path
) -> None:
    openb = load_openb()
    w = (openb.end - 24 * HOUR) // HOUR * HOUR
    window = (openb.epoch + timedelta(seconds=w - 6 * HOUR), openb.epoch + timedelta(seconds=w))
    live = (window[1] - timedelta(hours=1), window[1])
    copies = sum(1 for i in openb.between(w - HOUR, w).instances)
    resources = files("dlc_ledger.resources")
    with (
        as_file(resources / "quotas" / "closed-loop.yaml") as tree,
        as_file(resources / "pricebooks" / "demo-2026.yaml") as book,
    ):
        summary = run_replay(
            "openb",
            window=window,
            live=live,
            quotas=tree,
            pricebook=book,
            store=store,
            bootstrap=bootstrap,
            data_dir=tmp_path,
            closed_loop=True,
            progress=None,
            timeout=300,
        )
    print("\n".join(summary.lines()))
    assert summary.ok and summary.mismatches == [] and summary.workspaces_checked >= 3
    assert summary.closed_loop is not None and summary.closed_loop.jobs == copies
    live_from = openb.epoch + timedelta(seconds=(openb.end // HOUR + 1) * HOUR)
    assert f"checked against the trace to {live_from:%Y-%m-%dT%H:%M:%SZ}" in summary.notes[-1]
    decided = stored_events(store, "AdmissionDecided")
    assert decided and min(e.occurred_at for e in decided) >= live_from
