"""Queue policies and fair sharing in quota files: accepted, refused with a clear message,
and old stored specs (without the fields) still decode."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from pydantic import ValidationError

from dlc_ledger.services.yaml_files import parse_quota_tree
from ledger.dispatch.queues import QueueSettings
from ledger.dispatch.trees import dispatch_config
from ledger.errors import Invalid
from ledger.events import QuotaSpec
from ledger.quotas import QuotaTreeError

TREE = """
quotas:
  - name: root
    min: {gpu/any: 8000}
    fair_sharing: true
  - name: dept
    parent: root
    fair_sharing_weight: 0
  - name: a
    parent: dept
    min: {gpu/any: 4000}
    max: {gpu/any: 8000}
    lend_limit: {gpu/any: 1000}
    queue_policy: Balance
    balance_timeout: 600
    fair_sharing_weight: 2.5
    preemption: {within_quota: LowerPriority, reclaim: Any,
                 borrow_within: {policy: LowerPriority, max_priority_threshold: 3}}
    workspaces: [ws-a]
  - name: b
    parent: dept
    min: {gpu/any: 2000}
    queue_policy: Intelligent
    aging_interval: 120
  - name: c
    parent: root
"""


def test_queue_fields_reach_the_decision_core() -> None:
    config = dispatch_config(parse_quota_tree(TREE))
    assert [q.name for q in config.quotas] == ["root", "c", "dept", "a", "b"]
    nodes = {q.name: q for q in config.quotas}
    assert nodes["dept"].min == {"gpu/any": 6000} and nodes["dept"].parent == "root"
    assert nodes["dept"].weight == 0
    a = nodes["a"]
    assert (a.max, a.lend_limit, a.weight) == ({"gpu/any": 8000}, {"gpu/any": 1000}, 2.5)
    assert a.preemption.within_quota == "LowerPriority" and a.preemption.reclaim == "Any"
    assert a.preemption.borrow_within.max_priority_threshold == 3
    # every quota's: an inner quota's are its own workloads' (services on a parent quota)
    assert set(config.queues) == {"root", "c", "dept", "a", "b"}
    assert config.queues["a"].policy == "Balance"
    assert config.queues["a"].balance_timeout == timedelta(minutes=10)
    assert config.queues["b"].aging_interval == timedelta(minutes=2)
    assert config.queues["c"].policy == "BestEffortFIFO"
    assert config.fair_sharing and config.fair_sharing_roots == {"root"}


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ("queue_policy: Fifo", "quota 'a': queue_policy 'Fifo' is not one of FIFO, RoundRobin"),
        ("balance_timeout: 0", "quota 'a': balance_timeout: 0 is not a positive number of seconds"),
        ("aging_interval: '10'", "quota 'a': aging_interval: '10' is not a positive number"),
        ("aging_interval: 1.5", "quota 'a': aging_interval: 1.5 is not a positive number"),
        ("on_unfit_head: skip", "quota 'a': on_unfit_head 'skip' is not one of Retry, Skip"),
        ("fair_sharing_weight: -1", "quota 'a': fair_sharing_weight: -1 is not a number >= 0"),
        ("fair_sharing: yes please", "quota 'a': fair_sharing: 'yes please' is not true or false"),
        ("fair_sharing: true", "quota 'a': fair_sharing applies to a whole tree, so it is set on"),
    ],
)
def test_bad_queue_fields_are_refused_naming_the_quota(node: str, message: str) -> None:
    text = f"- {{name: root, min: {{cpu: 8}}}}\n- {{name: a, parent: root, {node}}}\n"
    with pytest.raises(QuotaTreeError) as caught:
        parse_quota_tree(text)
    assert message in str(caught.value)


def test_a_spec_stored_before_queue_fields_still_decodes() -> None:
    old = {
        "quota_id": "a",
        "parent": "root",
        "min": {"cpu": 4},
        "max": {},
        "lend_limit": {},
        "preemption": {"within_quota": "Never", "reclaim": "Never"},
        "queue_policy": "StrictFIFO",
    }
    spec = QuotaSpec.model_validate(old)
    assert spec.queue_policy == "StrictFIFO"
    assert (spec.balance_timeout, spec.aging_interval) == (None, None)
    assert spec.fair_sharing_weight == Decimal(1) and spec.fair_sharing is False
    assert QuotaSpec.model_validate(spec.model_dump(mode="json")) == spec


def test_on_unfit_head_reaches_the_decision_core_and_defaults_to_retry() -> None:
    text = (
        "- {name: root, min: {cpu: 8}}\n"
        "- {name: a, parent: root, queue_policy: FIFO, on_unfit_head: Skip}\n"
        "- {name: b, parent: root, queue_policy: StrictFIFO, on_unfit_head: Retry}\n"
        "- {name: c, parent: root, queue_policy: FIFO}\n"
    )
    tree = parse_quota_tree(text)
    assert [tree.specs[q].on_unfit_head for q in "abc"] == ["Skip", "Retry", "Retry"]
    queues = dispatch_config(tree).queues
    assert [queues[q].on_unfit_head for q in "abc"] == ["Skip", "Retry", "Retry"]


def test_the_default_on_unfit_head_leaves_a_stored_spec_as_it_was() -> None:
    # dropped from the payload when it is the default (as resource_groups when empty), so
    # specs applied before the field existed hash, and diff, as they did
    spec = parse_quota_tree("- {name: root, min: {cpu: 8}}\n").specs["root"]
    assert "on_unfit_head" not in spec.model_dump(mode="json")
    assert QuotaSpec.model_validate(spec.model_dump(mode="json")).on_unfit_head == "Retry"
    skip = spec.model_copy(update={"on_unfit_head": "Skip"})
    assert skip.model_dump(mode="json")["on_unfit_head"] == "Skip"
    assert QuotaSpec.model_validate(skip.model_dump(mode="json")) == skip
    with pytest.raises(ValidationError):
        QuotaSpec.model_validate({**spec.model_dump(mode="json"), "on_unfit_head": "Drop"})


@pytest.mark.parametrize("field", ["balance_timeout", "aging_interval"])
@pytest.mark.parametrize("seconds", [0, -5])
def test_the_file_and_the_python_api_refuse_the_same_durations(field: str, seconds: int) -> None:
    text = f"- {{name: root, min: {{cpu: 8}}}}\n- {{name: a, parent: root, {field}: {seconds}}}\n"
    with pytest.raises(QuotaTreeError, match=f"{field}: {seconds} is not a positive number"):
        parse_quota_tree(text)
    with pytest.raises(Invalid, match=f"{field}: .* is not a positive duration"):
        QueueSettings(**{field: timedelta(seconds=seconds)})  # type: ignore[arg-type]
    # the least both accept: one second
    one = parse_quota_tree(text.replace(f": {seconds}}}", ": 1}"))
    assert getattr(dispatch_config(one).queues["a"], field) == timedelta(seconds=1)
