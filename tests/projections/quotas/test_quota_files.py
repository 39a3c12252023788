"""Quota tree files: validation errors name the quota; diffs hold only the differences."""

from __future__ import annotations

import pytest

from dlc_ledger.services.yaml_files import parse_quota_tree
from ledger.events import QuotaChanged, QuotaCreated, QuotaDeleted, WorkspaceBound
from ledger.quotas import QuotaTree, QuotaTreeError, diff
from tests.support.demo_files import DEMO_QUOTAS as DEMO

BASE = """
quotas:
  - name: root
    min: {gpu/any: 8000, cpu: 64000, memory: 262144}
  - name: team-a
    parent: root
    min: {gpu/any: 4000, cpu: 32000}
    max: {gpu/any: 8000}
    workspaces: [ws-a]
  - name: team-b
    parent: root
    min: {gpu/any: 2000}
    lend_limit: {gpu/any: 1000}
    workspaces: [ws-b, ws-b2]
"""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "- {name: a, parent: b}\n- {name: b, parent: c}\n- {name: c, parent: a}\n",
            "quota 'a' is in a parent cycle: a -> b -> c -> a",
        ),
        (
            "- {name: p, min: {cpu: 10}}\n- {name: c1, parent: p, min: {cpu: 6}}\n"
            "- {name: c2, parent: p, min: {cpu: 5}}\n",
            "quota 'p': its children's min.cpu add up to 11, more than its own min.cpu = 10",
        ),
        ("- {name: a, mins: {cpu: 1}}\n", "quota 'a': unknown field(s) ['mins']"),
        ("- {name: a, min: {cpu: 1.5}}\n", "quota 'a': min.cpu: 1.5 is not a non-negative integer"),
        ("- {name: a, min: {memory: 16Gi}}\n", "(memory is counted in MiB)"),
        ("- {name: a, min: {cpu: -1}}\n", "quota 'a': min.cpu: -1 is not a non-negative"),
        ("- {name: a, min: {gpu: 1000}}\n", "quota 'a': min: unknown resource key 'gpu'"),
        ("- {name: a, parent: nowhere}\n", "quota 'a': unknown parent 'nowhere'"),
        (
            "- {name: p, min: {cpu: 10}}\n- {name: a, parent: p, min: {cpu: 5}, max: {cpu: 4}}\n",
            "quota 'a': max.cpu = 4 is below min.cpu = 5",
        ),
        (
            "- {name: a, min: {cpu: 5}, lend_limit: {cpu: 6}}\n",
            "quota 'a': lend_limit.cpu = 6 exceeds min.cpu = 5",
        ),
        ("- {name: a, min: {cpu: 5}, max: {cpu: 6}}\n", "quota 'a' has no parent"),
        ("- {name: a}\n- {name: a}\n", "quota 'a' is defined twice"),
        (
            "- {name: a, workspaces: [ws]}\n- {name: b, workspaces: [ws]}\n",
            "workspace 'ws' is bound to both 'a' and 'b'",
        ),
        (
            "- {name: p, workspaces: [ws]}\n- {name: c, parent: p}\n",
            "quota 'p' has child quotas, so workspace 'ws' cannot be bound",
        ),
        (
            "- {name: a, preemption: {reclaim: Sometimes}}\n",
            "quota 'a': preemption.reclaim:",
        ),
        ("- {name: Bad Name}\n", "name 'Bad Name' must be lower-case"),
        # a binding introduces a workspace: its name is checked where it enters (issue 44)
        (
            '- {name: a, workspaces: ["ws\\nx"]}\n',
            "quota 'a': workspaces: control character '\\n' (U+000A) at position 2",
        ),
        ('- {name: a, workspaces: ["ws\\u202e"]}\n', "control character '\\u202e'"),
        ("- {name: a, workspaces: [" + "w" * 64 + "]}\n", "64 characters, at most 63"),
        # "$" matched before a trailing newline: names are matched whole
        ('- {name: "a\\n"}\n', "name 'a\\n' must be lower-case"),
        ('- {name: a, resource_groups: ["g\\n"]}\n', "resource_groups must be a list"),
        ('- {name: a, min: {"cpu\\n": 1}}\n', "unknown resource key 'cpu\\n'"),
        ("quotas: 3\n", "a quota tree is a list"),
        ("quota: []\n", "unknown top-level field(s) ['quota']"),
    ],
)
def test_invalid_trees_are_refused_naming_the_quota(text: str, message: str) -> None:
    with pytest.raises(QuotaTreeError) as info:
        parse_quota_tree(text)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "- name: a\n  min: {cpu: 1}\n  max: {cpu: 4}\n  min: {cpu: 2}\n",
            "line 4, column 3: duplicate key 'min' (first on line 2)",
        ),
        ("- {name: a, min: {cpu: 1, cpu: 2}}\n", "duplicate key 'cpu' (first on line 1)"),
        ("quotas: []\nquotas: [{name: a}]\n", "line 2, column 1: duplicate key 'quotas'"),
    ],
)
def test_a_repeated_key_is_refused_naming_its_line(text: str, message: str) -> None:
    # PyYAML alone keeps the last value: the quota would silently get min cpu 2
    with pytest.raises(QuotaTreeError) as info:
        parse_quota_tree(text)
    assert message in str(info.value)


def test_a_merge_key_overridden_is_not_a_repeat() -> None:
    tree = parse_quota_tree(
        "- &base {name: a, min: {cpu: 1}}\n- <<: *base\n  name: b\n  min: {cpu: 2}\n"
    )
    assert (tree.specs["a"].min, tree.specs["b"].min) == ({"cpu": 1}, {"cpu": 2})


def test_inner_min_defaults_to_the_sum_of_children_mins() -> None:
    tree = parse_quota_tree(
        "- {name: p}\n- {name: a, parent: p, min: {cpu: 3}}\n"
        "- {name: b, parent: p, min: {cpu: 4}}\n"
    )
    assert tree.specs["p"].min == {"cpu": 7}


def test_the_demo_tree_is_valid_and_binds_every_openb_workspace() -> None:
    tree = parse_quota_tree(DEMO.read_text())
    assert set(tree.bindings) == {"ws-ls", "ws-be", "ws-burstable", "ws-guaranteed"}


def test_diff_from_empty_creates_parents_before_children_then_binds() -> None:
    events = diff(QuotaTree(), parse_quota_tree(BASE))
    assert [type(e) for e in events] == [QuotaCreated] * 3 + [WorkspaceBound] * 3
    created = [e.spec.quota_id for e in events if isinstance(e, QuotaCreated)]
    assert created[0] == "root"


def test_diff_of_identical_trees_is_empty() -> None:
    assert diff(parse_quota_tree(BASE), parse_quota_tree(BASE)) == []


def test_diff_holds_only_the_differences_and_deletes_children_first() -> None:
    current = parse_quota_tree(
        BASE + "  - {name: team-c, parent: root}\n  - {name: team-c1, parent: team-c}\n"
    )
    desired = parse_quota_tree(
        BASE.replace("max: {gpu/any: 8000}", "max: {gpu/any: 6000}").replace(
            "[ws-b, ws-b2]", "[ws-b]"
        )
    )
    events = diff(current, desired)
    assert events == [
        QuotaChanged(spec=desired.specs["team-a"]),
        WorkspaceBound(workspace="ws-b2", quota=None),
        QuotaDeleted(quota_id="team-c1"),
        QuotaDeleted(quota_id="team-c"),
    ]
