"""The reporting arithmetic lends by the dispatcher's rule.

:mod:`ledger.quotas.usage` (the figures of ``quotas show/tree``, the projection, the
metrics) and :class:`ledger.dispatch.capacity.Tree` (Kueue's resource_node, what admission
uses) are two models of one tree. Exactly shared, for any tree and usage (no idle-mode
usage: the dispatcher admits idle jobs by another rule): a non-root node's ``borrowed`` is
Kueue's usage beyond its subtree quota, a root's over-admission is ``-available(root)``
when that is positive, and no node lends outside its subtree more than its ``lend_limit``.
"""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings

from dlc_ledger.services.yaml_files import parse_quota_tree
from ledger.dispatch import Admitted
from ledger.dispatch.capacity import Tree
from ledger.dispatch.trees import dispatch_config
from ledger.events import QuotaSpec
from ledger.quotas import FlavorUsage, QuotaTree, UsageCalculator, compute_usage, lent_outside
from tests.projections.quotas.test_usage_arithmetic import FLAVORS, trees_and_usage

_T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _kueue(specs: dict[str, QuotaSpec], used: dict[str, dict[str, int]]) -> Tree:
    config = dispatch_config(QuotaTree(specs=dict(specs)))
    return Tree(
        config.quotas,
        [
            Admitted(f"{q}/{f}", q, 0, {f: v}, _T0)
            for q, per in used.items()
            for f, v in per.items()
            if v
        ],
    )


@settings(max_examples=300, deadline=None)
@given(trees_and_usage())
def test_borrowing_and_over_admission_are_the_dispatchers(
    case: tuple[dict[str, QuotaSpec], dict[str, dict[str, int]], dict[str, dict[str, int]]],
) -> None:
    specs, used, _ = case
    rows = compute_usage(specs, used, flavors=FLAVORS)
    tree = _kueue(specs, used)
    for (name, flavor), row in rows.items():
        beyond = tree.usage(name, flavor) - tree.subtree(name, flavor)
        if specs[name].parent is None:
            assert row.borrowed == 0
            assert row.over_admitted == max(0, -tree.available(name, flavor)), (name, flavor)
        else:
            assert row.borrowed == max(0, beyond), (name, flavor, row)
    parents = {n: s.parent for n, s in specs.items()}
    outside = lent_outside(parents, rows)
    calc = UsageCalculator(specs)
    kept = FlavorUsage(calc, "cpu")  # the incremental engine keeps each node's share apart
    for leaf in calc.leaves:
        kept.set_leaf(calc.index[leaf], used[leaf]["cpu"], 0, 0, 0, 0)
    kept.settle()
    assert {n: outside[(n, "cpu")] for n in specs} == {
        n: kept.lent_up[calc.index[n]] for n in specs
    }
    for (name, flavor), out in outside.items():
        assert out >= 0, (name, flavor)
        limit = specs[name].lend_limit.get(flavor)
        if specs[name].parent is None:
            assert out == 0  # a root lends to nobody
        elif limit is not None:
            assert out <= limit, (name, flavor, out, limit)


@settings(max_examples=200, deadline=None)
@given(trees_and_usage())
def test_without_caps_a_tree_fits_exactly_when_nothing_is_over_admitted(
    case: tuple[dict[str, QuotaSpec], dict[str, dict[str, int]], dict[str, dict[str, int]]],
) -> None:
    """With no ``max``, the dispatcher has room (``available >= 0``) at every node exactly
    when the report shows no over-admission anywhere."""
    specs, used, _ = case
    specs = {n: s.model_copy(update={"max": {}}) for n, s in specs.items()}
    rows = compute_usage(specs, used, flavors=FLAVORS)
    tree = _kueue(specs, used)
    for flavor in FLAVORS:
        fits = all(tree.available(name, flavor) >= 0 for name in specs)
        assert fits == all(rows[(name, flavor)].over_admitted == 0 for name in specs)


def test_a_node_never_lends_beyond_its_lend_limit() -> None:
    """The demo's shape: ``ls`` borrows 8; the pool gives 4, ``g`` at most its limit 2, and
    ``online`` borrows the other 2 from above (the dispatcher holds 2 of ``g`` back)."""
    tree = parse_quota_tree(
        "- {name: root, min: {cpu: 80}}\n"
        "- {name: online, parent: root, min: {cpu: 40}}\n"
        "- {name: ls, parent: online, min: {cpu: 32}}\n"
        "- {name: g, parent: online, min: {cpu: 4}, lend_limit: {cpu: 2}}\n"
        "- {name: offline, parent: root, min: {cpu: 20}}\n"
    )
    rows = compute_usage(tree.specs, {"ls": {"cpu": 40}})
    figures = {q: (r.used, r.borrowed, r.lent) for (q, _), r in rows.items()}
    assert figures == {
        "root": (40, 0, 2),  # its pool supplies online's 2
        "online": (40, 2, 6),  # 4 from its pool + the 2 it borrowed, passed down to ls
        "ls": (40, 8, 0),
        "g": (0, 0, 2),
        "offline": (0, 0, 0),
    }
    assert sum(r.lent for r in rows.values()) == sum(r.borrowed for r in rows.values()) == 10
    kueue = _kueue(tree.specs, {"ls": {"cpu": 40}})
    assert kueue.usage("online", "cpu") - kueue.subtree("online", "cpu") == 2


def test_a_root_that_cannot_lend_enough_is_over_admitted() -> None:
    tree = parse_quota_tree(
        "- {name: root, min: {cpu: 10}}\n"
        "- {name: a, parent: root, min: {cpu: 5}}\n"
        "- {name: b, parent: root, min: {cpu: 5}, lend_limit: {cpu: 1}}\n"
    )
    rows = compute_usage(tree.specs, {"a": {"cpu": 8}, "b": {"cpu": 0}})
    # a borrows 3, b lends 1 (its limit): the root's 10 hold 8, yet 2 cannot be lent
    assert rows[("b", "cpu")].lent == 1
    assert rows[("root", "cpu")].lent == 2
    assert rows[("root", "cpu")].over_admitted == 2
    assert rows[("a", "cpu")].over_admitted == 0  # within root's cap: not a usage excess
    kueue = _kueue(tree.specs, {"a": {"cpu": 8}})
    assert kueue.available("root", "cpu") == -2
