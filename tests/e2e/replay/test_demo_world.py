"""The demo's one world (issue 46): the openb history, then twelve live hours holding the
window's training again and an inference service's scale-ups, on the tree with an
inference quota added as they begin."""

from __future__ import annotations

from datetime import timedelta

from dlc_ledger.services.yaml_files import parse_quota_tree
from dlc_ledger.wiring.replay import DEMO_WINDOW, demo_world, live_tree
from tests.support.demo_files import DEMO_QUOTAS


def test_the_live_hours_follow_the_history_with_training_and_a_service() -> None:
    world = demo_world()
    trace = world.trace
    history = [i for i in trace.instances if not i.job_name.endswith("-live")]
    live = [i for i in trace.instances if i.job_name.endswith("-live")]
    assert len(history) == 8152
    training = [i for i in live if i.service is None]
    replicas = [i for i in live if i.service is not None]
    assert len(training) == len(world.trace_jobs) == len(world.live_jobs) == 172
    assert {i.job_name for i in training} == set(world.live_jobs)
    assert {i.service for i in replicas} == {"app-151-live"} and len(replicas) == 115
    assert all(i.gpu_milli > 0 and i.workspace == "app_151" for i in replicas)
    # the live hours begin after every row of the history, on the hour
    at = round((world.live_from - trace.epoch).total_seconds())
    assert at % 3600 == 0 and all(i.created < at for i in history)
    assert all(i.created >= at for i in live)
    start, end = world.live_window
    assert end - start == DEMO_WINDOW[1] - DEMO_WINDOW[0] == timedelta(hours=12)


def test_the_live_tree_adds_the_inference_quota_and_binds_the_service() -> None:
    demo = parse_quota_tree(DEMO_QUOTAS.read_text())
    live = parse_quota_tree(live_tree(DEMO_QUOTAS.read_text()))  # validated as a file is
    assert set(live.specs) - set(demo.specs) == {"inference"}
    assert live.bindings["app_151"] == "inference"
    assert live.specs["inference"].parent == "openb"
    assert {q: s for q, s in live.specs.items() if q != "inference"} == demo.specs
