"""The Kubernetes watcher: an object it cannot map is quarantined; the watch goes on.

Poison: a pod whose container asks for ``nvidia.com/gpu: Infinity`` (the tracker's
integer conversion overflows). Before issue 44 the error left the list-watch loop before
its resourceVersion moved: the loop backed off and resumed at the same event forever, so
no pod after it was ever published.
"""

from __future__ import annotations

import copy

from kubesim import PODS, KubeSim
from kubesim.objects import pod_object
from ledger.store.postgres import PostgresEventStore
from tests.support.clis import CliCall
from tests.support.letters import listed_letters
from tests.support.watchers import Recorder, bind, make_job, make_pod, settle, start_watcher


def _poison_pod(sim: KubeSim, job: dict[str, object], name: str) -> dict[str, object]:
    pod = copy.deepcopy(pod_object(name, job, sim.clock.timestamp()))  # not the job's spec
    for container in pod["spec"]["containers"]:
        resources = container.setdefault("resources", {})
        resources.setdefault("requests", {})["nvidia.com/gpu"] = "Infinity"
        resources.setdefault("limits", {})["nvidia.com/gpu"] = "Infinity"
    return bind(sim, sim.cluster.create(PODS, pod), "n1")


def test_an_unmappable_pod_is_dead_lettered_and_the_next_one_published(
    sim: KubeSim, recorder: Recorder, store: PostgresEventStore, cli: CliCall
) -> None:
    watcher = start_watcher(sim, recorder, store=store, cluster="poison")
    try:
        job = make_job(sim, "j1")
        bad = _poison_pod(sim, job, "bad")
        good = make_pod(sim, job, "good", node="n1")
        settle(watcher, sim)
        started = {e.data["pod_name"] for e in recorder.of("OccupancyStarted")}
        assert started == {"good"}  # the watch went past the poison
        assert watcher.stats.quarantined == 1
        # and on: the next event of a good pod is published too
        later = make_pod(sim, job, "later", node="n1")
        settle(watcher, sim)
        assert {e.data["pod_name"] for e in recorder.of("OccupancyStarted")} == {"good", "later"}
    finally:
        watcher.stop()
    letters = listed_letters(cli)
    assert [(r["source"], r["reason"]) for r in letters] == [
        ("watch:poison:pods", "unmappable-object")
    ]
    assert bad["metadata"]["uid"] in str(letters[0]["error"])
    assert "OverflowError" in str(letters[0]["error"])
    assert good["metadata"]["uid"] != bad["metadata"]["uid"] != later["metadata"]["uid"]
    # the letter is requeueable (the next relist reads the pod again) and discardable
    assert "tried again" in cli("dead-letters", "retry", str(letters[0]["id"]))
    assert listed_letters(cli) == []


def test_a_garbage_timestamp_is_dead_lettered_and_the_watch_goes_on(
    sim: KubeSim, recorder: Recorder, store: PostgresEventStore, cli: CliCall
) -> None:
    """A pod bound at ``"not-a-time"``: before, a plain ValueError (not a bad item) left
    the watch at the same event forever."""
    watcher = start_watcher(sim, recorder, store=store, cluster="garbage")
    try:
        job = make_job(sim, "j1")
        pod = copy.deepcopy(pod_object("bad", job, sim.clock.timestamp()))
        bad = bind(sim, sim.cluster.create(PODS, pod), "n1")
        meta = bad["metadata"]

        def garble(p: dict[str, object]) -> dict[str, object]:
            status = p["status"]
            assert isinstance(status, dict)
            for cond in status.get("conditions") or []:
                cond["lastTransitionTime"] = "not-a-time"
            status["startTime"] = "not-a-time"
            return p

        sim.cluster.update(PODS, meta["namespace"], meta["name"], garble)
        make_pod(sim, job, "good", node="n1")
        settle(watcher, sim)
        # the garbled update is quarantined; the pod created after it is published
        assert "good" in {e.data["pod_name"] for e in recorder.of("OccupancyStarted")}
        assert watcher.stats.quarantined >= 1
    finally:
        watcher.stop()
    letters = listed_letters(cli)
    assert letters and "invalid timestamp 'not-a-time'" in str(letters[0]["error"])
