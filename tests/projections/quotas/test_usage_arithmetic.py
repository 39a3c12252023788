"""Usage arithmetic: subtree sums, borrowed within bounds, total lent = total borrowed."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from dlc_ledger.services.yaml_files import parse_quota_tree
from ledger.events import QuotaSpec
from ledger.quotas import NO_QUOTA, FlavorUsage, UsageCalculator, allocate, compute_usage
from ledger.usage_boards import UsageBoard
from tests.support.quotas import check_invariants

FLAVORS = ("gpu/any", "cpu")


@st.composite
def trees_and_usage(
    draw: st.DrawFn,
) -> tuple[dict[str, QuotaSpec], dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    n = draw(st.integers(1, 8))
    parents: list[int | None] = [None]
    for i in range(1, n):
        parents.append(draw(st.one_of(st.none(), st.integers(0, i - 1))))
    names = [f"q{i}" for i in range(n)]
    children: dict[int, list[int]] = {}
    for i, p in enumerate(parents):
        if p is not None:
            children.setdefault(p, []).append(i)
    mins: dict[int, dict[str, int]] = {}
    for i in reversed(range(n)):  # children have larger indexes: build mins bottom-up
        kids = children.get(i, [])
        mins[i] = {f: sum(mins[k][f] for k in kids) + draw(st.integers(0, 6)) for f in FLAVORS}
    specs: dict[str, QuotaSpec] = {}
    for i in range(n):
        root = parents[i] is None
        cap = {f: mins[i][f] + (0 if root else draw(st.integers(0, 8))) for f in FLAVORS}
        lend = {f: draw(st.integers(0, mins[i][f])) for f in FLAVORS if draw(st.booleans())}
        specs[names[i]] = QuotaSpec(
            quota_id=names[i],
            parent=None if root else names[parents[i]],  # type: ignore[index]
            min=mins[i],
            max=cap if draw(st.booleans()) else {},
            lend_limit=lend,
        )
    used: dict[str, dict[str, int]] = {}
    idle: dict[str, dict[str, int]] = {}
    for i in range(n):
        if i in children:
            continue
        used[names[i]] = {f: draw(st.integers(0, 12)) for f in FLAVORS}
        idle[names[i]] = {f: draw(st.integers(0, used[names[i]][f])) for f in FLAVORS}
    return specs, used, idle


@settings(max_examples=300, deadline=None)
@given(trees_and_usage())
def test_tree_invariants_hold_for_any_usage(
    case: tuple[dict[str, QuotaSpec], dict[str, dict[str, int]], dict[str, dict[str, int]]],
) -> None:
    specs, used, idle = case
    usage = compute_usage(specs, used, idle)
    state = {k: SimpleNamespace(**vars_of(v)) for k, v in usage.items()}
    check_invariants(specs, state)
    for (quota, flavor), row in usage.items():
        if quota in used:
            assert row.used == used[quota][flavor]
            if specs[quota].parent is not None:  # a root has nobody to borrow from
                assert row.borrowed >= idle[quota][flavor]


def vars_of(row: object) -> dict[str, int]:
    return {n: getattr(row, n) for n in ("min", "max", "used", "borrowed", "lent", "over_admitted")}


def test_borrower_is_supplied_by_the_pool_then_by_siblings() -> None:
    tree = parse_quota_tree(
        "- {name: root, min: {cpu: 12}}\n"
        "- {name: a, parent: root, min: {cpu: 4}}\n"
        "- {name: b, parent: root, min: {cpu: 4}, lend_limit: {cpu: 1}}\n"
        "- {name: c, parent: root, min: {cpu: 2}}\n"
    )
    usage = compute_usage(tree.specs, {"a": {"cpu": 8}, "b": {"cpu": 0}, "c": {"cpu": 0}})
    # a borrows 4: 2 from root's shared pool (12 - 10), then 1 from b (its lend limit), 1 from c
    assert usage[("a", "cpu")].borrowed == 4
    assert usage[("root", "cpu")].lent == 2
    assert usage[("b", "cpu")].lent == 1
    assert usage[("c", "cpu")].lent == 1
    assert usage[("root", "cpu")].over_admitted == 0


def test_idle_usage_always_borrows_and_a_root_never_does() -> None:
    tree = parse_quota_tree(
        "- {name: root, min: {cpu: 10}}\n- {name: a, parent: root, min: {cpu: 10}}\n"
    )
    usage = compute_usage(tree.specs, {"a": {"cpu": 12}}, {"a": {"cpu": 3}})
    assert usage[("a", "cpu")].borrowed == 3 + 0  # 9 regular within min 10, 3 idle
    assert usage[("root", "cpu")].borrowed == 0
    assert usage[("root", "cpu")].over_admitted == 2
    assert usage[("a", "cpu")].over_admitted == 2  # a's cap is inherited from root


def test_allocate_is_proportional_exact_and_deterministic() -> None:
    assert allocate(5, {"a": 3, "b": 3, "c": 3}) == {"a": 2, "b": 2, "c": 1}
    assert allocate(10, {"a": 1, "b": 2}) == {"a": 1, "b": 2}
    assert allocate(0, {"a": 1}) == {"a": 0}


@settings(max_examples=200, deadline=None)
@given(
    trees_and_usage(),
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 12), st.integers(0, 12)), max_size=12),
)
def test_incremental_flavor_usage_equals_a_full_recomputation(
    case: tuple[dict[str, QuotaSpec], dict[str, dict[str, int]], dict[str, dict[str, int]]],
    updates: list[tuple[int, int, int]],
) -> None:
    specs, used, idle = case
    calc = UsageCalculator(specs)
    leaves = sorted(calc.leaves)
    incremental = FlavorUsage(calc, "cpu")
    for quota in leaves:
        incremental.set_leaf(calc.index[quota], used[quota]["cpu"], idle[quota]["cpu"], 0, 0, 0)
    incremental.settle()
    for n, total, part in updates:  # then leaves change one at a time
        quota = leaves[n % len(leaves)]
        used[quota]["cpu"], idle[quota]["cpu"] = total, min(part, total)
        before = [incremental.row(i) for i in range(len(calc.order))]
        incremental.set_leaf(calc.index[quota], total, min(part, total), n, 1, 0)
        changed = incremental.settle()
        after = [incremental.row(i) for i in range(len(calc.order))]
        assert {i for i in range(len(after)) if after[i] != before[i]} <= changed
        full = compute_usage(specs, used, idle, flavors=["cpu"])
        for i, name in enumerate(calc.order):
            row = full[(name, "cpu")]
            expected = (row.min, row.max, row.used, row.borrowed, row.lent)
            assert after[i][:5] == expected and after[i][8] == row.over_admitted, name


@st.composite
def naming_models(draw: st.DrawFn) -> dict[str, QuotaSpec]:
    """A tree of :func:`trees_and_usage` whose non-root nodes may name ``gpu/A100`` (a
    cap: they may borrow that model)."""
    specs = draw(trees_and_usage())[0]
    return {
        name: spec.model_copy(update={"max": {**spec.max, "gpu/A100": draw(st.integers(0, 8))}})
        if spec.parent is not None and draw(st.booleans())
        else spec
        for name, spec in specs.items()
    }


def _counted_by_hand(
    specs: dict[str, QuotaSpec], own: dict[str, dict[str, list[int]]]
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """Leaves' used and idle per flavor, a model counted as itself where the leaf names
    it, else as gpu/any (the rule, written out independently of the board)."""
    parents = {s.parent for s in specs.values()}
    used: dict[str, dict[str, int]] = {}
    idle: dict[str, dict[str, int]] = {}
    for flavor, per in own.items():
        for quota, raw in per.items():
            if quota not in specs or quota in parents:
                continue
            spec = specs[quota]
            named = flavor in {**spec.min, **spec.max, **spec.lend_limit}
            key = flavor if named or not flavor.startswith("gpu/") else "gpu/any"
            used.setdefault(quota, {})[key] = used.get(quota, {}).get(key, 0) + raw[0]
            idle.setdefault(quota, {})[key] = idle.get(quota, {}).get(key, 0) + raw[1]
    return used, idle


@settings(max_examples=150, deadline=None)
@given(
    naming_models(),
    naming_models(),
    st.lists(
        st.one_of(
            st.tuples(
                st.just("add"),
                st.sampled_from(["q0", "q1", "q2", "q3", "q5", "gone"]),
                st.sampled_from(["gpu/any", "gpu/A100", "gpu/T4", "cpu", "memory"]),
                st.lists(st.integers(-2, 6), min_size=5, max_size=5),
            ),
            st.tuples(st.just("tree"), st.integers(0, 1)),
            st.tuples(st.just("settle")),
        ),
        max_size=30,
    ),
)
def test_board_changes_replay_to_a_board_built_from_scratch(
    first: dict[str, QuotaSpec],
    second: dict[str, QuotaSpec],
    steps: list[tuple[object, ...]],
) -> None:
    """Applying a board's reported changes to its first rows gives exactly the rows a
    fresh board computes from the same raw usage and tree (incremental = whole), and a
    ``gpu/<model>`` counts as itself only on a leaf that names it, else as ``gpu/any``,
    re-counted when the tree changes."""
    trees = (first, second)
    board = UsageBoard(trees[0])
    seen: dict[tuple[str, str], tuple[int, ...]] = {}

    def settle() -> None:
        for key, numbers in board.settle().items():
            if numbers is None:
                seen.pop(key)
            else:
                seen[key] = numbers
        fresh = UsageBoard(board.specs)
        for flavor, per in board.own.items():
            for quota, raw in per.items():
                fresh.add(quota, flavor, raw)
        fresh.settle()
        assert seen == board.rows == fresh.rows
        used, idle = _counted_by_hand(board.specs, board.own)
        flavors = {f for (q, f) in board.rows if q != NO_QUOTA}
        assert flavors >= {f for per in used.values() for f in per}
        # the arithmetic takes no negative usage (the steps' raw changes may go below zero)
        negative = {f for per in (*used.values(), *idle.values()) for f, v in per.items() if v < 0}
        expected = compute_usage(board.specs, used, idle, flavors=flavors - negative)
        for key, row in expected.items():
            numbers = board.rows[key]
            assert numbers[:5] == (row.min, row.max, row.used, row.borrowed, row.lent), key

    for step in steps:
        if step[0] == "add":
            board.add(step[1], step[2], step[3])  # type: ignore[arg-type]
        elif step[0] == "tree":
            board.set_tree(trees[step[1]])  # type: ignore[index]
        else:
            settle()
    settle()
    for (quota, _), numbers in board.rows.items():
        if quota == NO_QUOTA:
            assert numbers[:2] == (0, 0) and numbers[3:5] == (0, 0)
