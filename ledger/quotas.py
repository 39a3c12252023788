"""Quota rules, with no IO: the quota tree file, its validation, diffs and usage arithmetic.

An operator edits a quota tree as YAML (``ops/quotas/*.yaml``) and applies it; the
tree becomes ``QuotaCreated`` / ``QuotaChanged`` / ``QuotaDeleted`` / ``WorkspaceBound``
events. Everything here is a pure function of plain values, so the apply command, the
quota projection and the tests share one definition of "valid tree", "what changed"
and "who borrows from whom".

Units (one per resource key, integers only, never fractions):

- ``gpu/<model>`` and ``gpu/any``: milli-GPU (1 GPU = 1000);
- ``cpu``: milli-cores (1 core = 1000);
- ``memory``: MiB.

Usage arithmetic, per quota node and flavor (see ``docs/quotas.md``):

- ``used``: the subtree's usage (only leaves own usage);
- ``borrowed``: usage above the node's ``min`` (never negative); a leaf's idle-mode usage
  always counts as borrowed. A root has nobody to borrow from: it never borrows, usage
  above its capacity is over-admission;
- ``lent``: at each inner node, the children's borrowing is supplied first from the
  node's shared pool (its min minus its children's mins), then from the siblings' unused
  min (the lendable part first, in proportion to it), and whatever is left the node
  itself borrowed from above (or, at a root, is over capacity) and passes down. Each
  supplier's share is its ``lent``, so the tree's total ``lent`` equals its total
  ``borrowed`` exactly;
- ``max``: the node's own cap, else its parent's; a root's cap is its min;
- ``over_admitted``: usage above ``max`` (a quota change never evicts, it shows here).

Flavor fungibility (:func:`counted_flavor`): usage of ``gpu/<model>`` counts against a
quota's ``gpu/<model>`` entry when the quota names that key itself, else against its
``gpu/any``, as a Kueue ClusterQueue admits only flavors it lists.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ledger.canonical import canonical_json
from ledger.envelopes import EventData
from ledger.events import (
    QuotaChanged,
    QuotaCreated,
    QuotaDeleted,
    QuotaSpec,
    WorkspaceBound,
)
from ledger.prices import lookup_keys
from ledger.yaml_files import YamlError, load_yaml

__all__ = [
    "NO_QUOTA",
    "RESOURCE_UNITS",
    "FlavorUsage",
    "NodeUsage",
    "QuotaTree",
    "QuotaTreeError",
    "UsageCalculator",
    "allocate",
    "build_quota_tree",
    "compute_usage",
    "counted_flavor",
    "counting_flavors",
    "diff",
    "keep_absent",
    "parse_quota_tree",
    "resource_unit",
    "spec_hash",
    "topological_order",
    "validate_tree",
]

#: Where usage goes whose job has no quota (unbound workspace, deleted or inner quota).
NO_QUOTA = "-"

RESOURCE_UNITS = {"gpu/*": "mGPU", "cpu": "milli-cores", "memory": "MiB"}

_KEY = re.compile(r"^(gpu/[A-Za-z0-9][A-Za-z0-9._-]*|cpu|memory)$")
_NAME = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,251}[a-z0-9])?$")
_NODE_FIELDS = frozenset(
    {"name", "parent", "min", "max", "lend_limit", "preemption", "queue_policy", "workspaces"}
)


class QuotaTreeError(ValueError):
    """A quota tree that cannot be applied; the message names the quota and the field."""


def resource_unit(key: str) -> str:
    """The unit quantities of ``key`` are counted in."""
    if key.startswith("gpu/"):
        return "mGPU"
    return RESOURCE_UNITS.get(key, "")


@dataclass(frozen=True)
class QuotaTree:
    """Quota specs by id and workspace bindings (workspace -> quota id)."""

    specs: Mapping[str, QuotaSpec] = field(default_factory=dict)
    bindings: Mapping[str, str] = field(default_factory=dict)

    def children(self) -> dict[str, list[str]]:
        return _children(self.specs)

    def workspaces_of(self, quota_id: str) -> list[str]:
        return sorted(ws for ws, q in self.bindings.items() if q == quota_id)


def spec_hash(spec: QuotaSpec) -> str:
    """A stable digest of a spec (deterministic event ids of apply)."""
    return hashlib.sha256(canonical_json(spec.model_dump(mode="json"))).hexdigest()


# --- parsing ------------------------------------------------------------------


def parse_quota_tree(text: str) -> QuotaTree:
    """Parse a quota tree file: a list of nodes, or a mapping with a ``quotas`` list."""
    try:
        raw = load_yaml(text)
    except YamlError as exc:
        raise QuotaTreeError(str(exc)) from None
    if isinstance(raw, dict):
        unknown = sorted(set(raw) - {"quotas"})
        if unknown:
            raise QuotaTreeError(f"unknown top-level field(s) {unknown}; expected 'quotas'")
        raw = raw.get("quotas")
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise QuotaTreeError("a quota tree is a list of quota nodes (or {quotas: [...]})")
    return build_quota_tree(raw)


def _quantities(name: str, what: str, value: Any) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise QuotaTreeError(f"quota {name!r}: {what} must be a mapping of resource -> quantity")
    out: dict[str, int] = {}
    for key, qty in value.items():
        if not isinstance(key, str) or not _KEY.match(key):
            raise QuotaTreeError(
                f"quota {name!r}: {what}: unknown resource key {key!r} "
                "(expected gpu/<model>, gpu/any, cpu or memory)"
            )
        if isinstance(qty, bool) or not isinstance(qty, int) or qty < 0:
            raise QuotaTreeError(
                f"quota {name!r}: {what}.{key}: {qty!r} is not a non-negative integer "
                f"({key} is counted in {resource_unit(key)})"
            )
        out[key] = qty
    return out


def build_quota_tree(nodes: Sequence[Any]) -> QuotaTree:
    """Validate plain node mappings (as parsed from YAML) into a :class:`QuotaTree`."""
    raw_nodes: dict[str, dict[str, Any]] = {}
    explicit_min: dict[str, bool] = {}
    bindings: dict[str, str] = {}
    for index, node in enumerate(nodes):
        if not isinstance(node, dict):
            raise QuotaTreeError(f"quota node #{index + 1} is not a mapping")
        name = node.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise QuotaTreeError(
                f"quota node #{index + 1}: name {name!r} must be lower-case letters, digits, "
                "'-', '_' or '.' (at most 253)"
            )
        unknown = sorted(set(node) - _NODE_FIELDS)
        if unknown:
            raise QuotaTreeError(
                f"quota {name!r}: unknown field(s) {unknown} (known: {sorted(_NODE_FIELDS)})"
            )
        if name in raw_nodes:
            raise QuotaTreeError(f"quota {name!r} is defined twice")
        parent = node.get("parent")
        if parent is not None and not isinstance(parent, str):
            raise QuotaTreeError(f"quota {name!r}: parent must be a quota name")
        workspaces = node.get("workspaces") or []
        if not isinstance(workspaces, list) or not all(
            isinstance(w, str) and w for w in workspaces
        ):
            raise QuotaTreeError(f"quota {name!r}: workspaces must be a list of names")
        for ws in workspaces:
            if ws in bindings:
                raise QuotaTreeError(
                    f"workspace {ws!r} is bound to both {bindings[ws]!r} and {name!r}"
                )
            bindings[ws] = name
        explicit_min[name] = "min" in node
        raw_nodes[name] = {
            "quota_id": name,
            "parent": parent,
            "min": _quantities(name, "min", node.get("min")),
            "max": _quantities(name, "max", node.get("max")),
            "lend_limit": _quantities(name, "lend_limit", node.get("lend_limit")),
            "preemption": node.get("preemption") or {},
            "queue_policy": node.get("queue_policy", "BestEffortFIFO"),
        }
    for name, node in raw_nodes.items():
        if node["parent"] is not None and node["parent"] not in raw_nodes:
            raise QuotaTreeError(f"quota {name!r}: unknown parent {node['parent']!r}")
    _refuse_cycles({n: v["parent"] for n, v in raw_nodes.items()})

    # an inner node without a min guarantees exactly its children's mins (README)
    children = _children_of({n: v["parent"] for n, v in raw_nodes.items()})
    for name in reversed(_topo({n: v["parent"] for n, v in raw_nodes.items()})):
        if not explicit_min[name] and children.get(name):
            total: dict[str, int] = {}
            for child in children[name]:
                for key, qty in raw_nodes[child]["min"].items():
                    total[key] = total.get(key, 0) + qty
            raw_nodes[name]["min"] = total

    specs: dict[str, QuotaSpec] = {}
    for name, node in raw_nodes.items():
        try:
            specs[name] = QuotaSpec.model_validate(node)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise QuotaTreeError(f"quota {name!r}: {where}: {err['msg']}") from exc
    tree = QuotaTree(specs=specs, bindings=bindings)
    validate_tree(tree)
    return tree


# --- validation ---------------------------------------------------------------


def _children_of(parents: Mapping[str, str | None]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name in sorted(parents):
        parent = parents[name]
        if parent is not None and parent in parents:
            out.setdefault(parent, []).append(name)
    return out


def _children(specs: Mapping[str, QuotaSpec]) -> dict[str, list[str]]:
    return _children_of({n: s.parent for n, s in specs.items()})


def _refuse_cycles(parents: Mapping[str, str | None]) -> None:
    for start in sorted(parents):
        seen = [start]
        node = parents[start]
        while node is not None and node in parents:
            if node in seen:
                cycle = " -> ".join([*seen[seen.index(node) :], node])
                raise QuotaTreeError(f"quota {node!r} is in a parent cycle: {cycle}")
            seen.append(node)
            node = parents[node]


def _topo(parents: Mapping[str, str | None]) -> list[str]:
    """Parents before children, siblings by name; unknown parents count as roots."""
    children = _children_of(parents)
    roots = sorted(n for n, p in parents.items() if p is None or p not in parents)
    order: list[str] = []
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(reversed(children.get(node, [])))
    return order


def topological_order(specs: Mapping[str, QuotaSpec]) -> list[str]:
    """Quota ids with every parent before its children (depth first, by name)."""
    return _topo({n: s.parent for n, s in specs.items()})


def validate_tree(tree: QuotaTree) -> None:
    """Raise :class:`QuotaTreeError` naming the first rule a tree breaks."""
    specs = tree.specs
    for name, spec in specs.items():
        if spec.parent is not None and spec.parent not in specs:
            raise QuotaTreeError(f"quota {name!r}: unknown parent {spec.parent!r}")
    _refuse_cycles({n: s.parent for n, s in specs.items()})
    children = _children(specs)
    for name in topological_order(specs):
        spec = specs[name]
        for key, cap in spec.max.items():
            if cap < spec.min.get(key, 0):
                raise QuotaTreeError(
                    f"quota {name!r}: max.{key} = {cap} is below min.{key} = {spec.min.get(key, 0)}"
                )
        if spec.parent is None:
            for key, cap in spec.max.items():
                if cap > spec.min.get(key, 0):
                    raise QuotaTreeError(
                        f"quota {name!r} has no parent, so it has nothing to borrow from: "
                        f"max.{key} = {cap} must not exceed min.{key} = {spec.min.get(key, 0)}"
                    )
        for key, limit in spec.lend_limit.items():
            if limit > spec.min.get(key, 0):
                raise QuotaTreeError(
                    f"quota {name!r}: lend_limit.{key} = {limit} exceeds min.{key} = "
                    f"{spec.min.get(key, 0)}"
                )
        kids = children.get(name, [])
        if kids:
            keys = sorted({k for kid in kids for k in specs[kid].min})
            for key in keys:
                total = sum(specs[kid].min.get(key, 0) for kid in kids)
                if total > spec.min.get(key, 0):
                    raise QuotaTreeError(
                        f"quota {name!r}: its children's min.{key} add up to {total}, "
                        f"more than its own min.{key} = {spec.min.get(key, 0)} "
                        f"(children: {', '.join(kids)})"
                    )
    for ws, quota in sorted(tree.bindings.items()):
        if quota not in specs:
            raise QuotaTreeError(f"workspace {ws!r} is bound to unknown quota {quota!r}")
        if children.get(quota):
            raise QuotaTreeError(
                f"quota {quota!r} has child quotas, so workspace {ws!r} cannot be bound to it "
                "(only leaf quotas run jobs)"
            )


# --- diff ---------------------------------------------------------------------


def diff(current: QuotaTree, desired: QuotaTree) -> list[EventData]:
    """The events that turn ``current`` into ``desired``, and nothing else.

    Order: creations and changes with parents before children, then workspace
    (re)bindings (workspaces absent from ``desired`` are unbound), then deletions
    with children before parents.
    """
    events: list[EventData] = []
    for name in topological_order(desired.specs):
        spec = desired.specs[name]
        old = current.specs.get(name)
        if old is None:
            events.append(QuotaCreated(spec=spec))
        elif old != spec:
            events.append(QuotaChanged(spec=spec))
    for ws in sorted(set(current.bindings) | set(desired.bindings)):
        want = desired.bindings.get(ws)
        if current.bindings.get(ws) != want:
            events.append(WorkspaceBound(workspace=ws, quota=want))
    for name in reversed(topological_order(current.specs)):
        if name not in desired.specs:
            events.append(QuotaDeleted(quota_id=name))
    return events


def keep_absent(current: QuotaTree, desired: QuotaTree) -> tuple[QuotaTree, list[str], list[str]]:
    """``desired`` plus the quotas and bindings of ``current`` it does not name.

    What an apply without ``--prune`` aims at: a file that leaves a quota or a
    workspace out keeps it (as ``kubectl apply`` without ``--prune``), so an empty or
    truncated file deletes nothing. Returns the target tree and the kept quota ids and
    workspaces; raises :class:`QuotaTreeError` when the file and the kept nodes do not
    form a valid tree together.
    """
    kept_quotas = sorted(set(current.specs) - set(desired.specs))
    kept_bindings = sorted(set(current.bindings) - set(desired.bindings))
    tree = QuotaTree(
        specs={**{q: current.specs[q] for q in kept_quotas}, **desired.specs},
        bindings={**{w: current.bindings[w] for w in kept_bindings}, **desired.bindings},
    )
    try:
        validate_tree(tree)
    except QuotaTreeError as exc:
        raise QuotaTreeError(
            f"{exc}, once the quotas and bindings the file leaves out are kept "
            "(apply with --prune to delete them)"
        ) from exc
    return tree, kept_quotas, kept_bindings


# --- flavor fungibility -------------------------------------------------------


def _names(spec: QuotaSpec, key: str) -> bool:
    return key in spec.min or key in spec.max or key in spec.lend_limit


def counted_flavor(spec: QuotaSpec | None, flavor: str) -> str:
    """The key of quota ``spec`` that usage (or demand) of ``flavor`` counts against.

    ``gpu/<model>`` counts against the quota's own ``gpu/<model>`` entry when its spec
    names that key (in ``min``, ``max`` or ``lend_limit``), else against ``gpu/any``: the
    same fallback as a price book's (:func:`ledger.prices.lookup_keys`), decided by the
    leaf quota alone, as a Kueue ClusterQueue admits only the flavors it lists (a model
    named only by an ancestor is that subtree's pool for the children that name it).
    ``spec`` None (usage under no quota, a deleted or inner one): ``gpu/any``. Other keys
    (``gpu/any``, ``cpu``, ``memory``) count as themselves.
    """
    keys = lookup_keys(flavor)
    if spec is not None:
        for key in keys[:-1]:
            if _names(spec, key):
                return key
    return keys[-1]


def counting_flavors(flavor: str, stored: Iterable[str]) -> list[str]:
    """The recorded flavors among ``stored`` whose usage may count as ``flavor`` under
    some tree (:func:`counted_flavor`): ``gpu/any`` gathers every ``gpu/<model>``."""
    return sorted({f for f in stored if f == flavor or lookup_keys(f)[-1] == flavor} | {flavor})


# --- usage arithmetic ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """One quota node x flavor at an instant (all quantities in the key's unit)."""

    quota: str
    flavor: str
    min: int
    max: int
    used: int
    borrowed: int
    lent: int
    over_admitted: int

    @property
    def within_min(self) -> int:
        return self.used - self.borrowed


def allocate(amount: int, weights: Mapping[str, int]) -> dict[str, int]:
    """Split ``amount`` in proportion to ``weights`` (integers, largest remainder, ties by
    name); never more than a weight each, so ``amount >= sum(weights)`` returns weights."""
    total = sum(weights.values())
    if amount >= total:
        return dict(weights)
    if amount <= 0 or total == 0:
        return {k: 0 for k in weights}
    shares = {k: amount * w // total for k, w in weights.items()}
    left = amount - sum(shares.values())
    ranked = sorted(weights, key=lambda k: (-(amount * weights[k] % total), k))
    for k in ranked[:left]:
        shares[k] += 1
    return shares


def compute_usage(
    specs: Mapping[str, QuotaSpec],
    used: Mapping[str, Mapping[str, int]],
    idle: Mapping[str, Mapping[str, int]] | None = None,
    *,
    flavors: Iterable[str] | None = None,
) -> dict[tuple[str, str], NodeUsage]:
    """Per (quota, flavor): min, max, used, borrowed, lent, over-admission.

    ``used`` is each leaf quota's usage per flavor (idle-mode usage included);
    ``idle`` the part of it by idle-mode jobs. Usage on an inner or unknown quota is
    refused: the caller reports it under :data:`NO_QUOTA`.
    """
    idle = idle or {}
    calc = UsageCalculator(specs)
    for quota in [*used, *idle]:
        if quota not in calc.leaves:
            raise ValueError(f"usage on {quota!r}, which is not a leaf quota")
    if flavors is None:
        keys: set[str] = set()
        for spec in specs.values():
            keys.update(spec.min, spec.max, spec.lend_limit)
        for per in used.values():
            keys.update(per)
        flavors = keys
    out: dict[tuple[str, str], NodeUsage] = {}
    for flavor in sorted(set(flavors)):
        leaf_used = {q: v[flavor] for q, v in used.items() if v.get(flavor)}
        leaf_idle = {q: v[flavor] for q, v in idle.items() if v.get(flavor)}
        for row in calc.flavor(flavor, leaf_used, leaf_idle):
            out[(row.quota, flavor)] = row
    return out


class UsageCalculator:
    """The usage arithmetic for one tree, compiled once and run per flavor (hot path of
    the quota projection, which recomputes at every change point)."""

    def __init__(self, specs: Mapping[str, QuotaSpec]) -> None:
        self.specs = specs
        self.order = topological_order(specs)
        self.index = index = {name: i for i, name in enumerate(self.order)}
        self.parent = [
            index.get(specs[n].parent) if specs[n].parent is not None else None  # type: ignore[arg-type]
            for n in self.order
        ]
        self.children: list[list[int]] = [[] for _ in self.order]
        for i, p in enumerate(self.parent):
            if p is not None:
                self.children[p].append(i)
        self.leaves = frozenset(n for i, n in enumerate(self.order) if not self.children[i])
        self._per_flavor: dict[str, tuple[list[int], list[int | None], list[int | None]]] = {}

    def _compiled(self, flavor: str) -> tuple[list[int], list[int | None], list[int | None]]:
        found = self._per_flavor.get(flavor)
        if found is None:
            specs = [self.specs[n] for n in self.order]
            found = (
                [s.min.get(flavor, 0) for s in specs],
                [s.max.get(flavor) for s in specs],
                [s.lend_limit.get(flavor) for s in specs],
            )
            self._per_flavor[flavor] = found
        return found

    def flavor(
        self, flavor: str, used_in: Mapping[str, int], idle_in: Mapping[str, int]
    ) -> list[NodeUsage]:
        """One row per node (tree order) from each leaf's usage and idle-mode part."""
        return [
            NodeUsage(self.order[i], flavor, *numbers)
            for i, numbers in enumerate(self.numbers(flavor, used_in, idle_in))
        ]

    def numbers(
        self, flavor: str, used_in: Mapping[str, int], idle_in: Mapping[str, int]
    ) -> list[tuple[int, int, int, int, int, int]]:
        """Per node in tree order: (min, max, used, borrowed, lent, over_admitted)."""
        mins, maxes, lends = self._compiled(flavor)
        order, parent, children = self.order, self.parent, self.children
        n = len(order)
        used = [0] * n
        borrowed = [0] * n
        unused = [0] * n
        for i in range(n - 1, -1, -1):  # children before parents
            kids = children[i]
            if kids:
                total = 0
                for k in kids:
                    total += used[k]
                regular = total
                extra = 0
            else:
                total = used_in.get(order[i], 0)
                extra = min(total, idle_in.get(order[i], 0))
                regular = total - extra
            used[i] = total
            if parent[i] is not None:  # a root has nobody to borrow from
                borrowed[i] = max(0, regular - mins[i]) + extra
            unused[i] = max(0, mins[i] - regular)
        lent = [0] * n
        for i in range(n):
            kids = children[i]
            if not kids:
                continue
            demand = 0
            kid_mins = 0
            for k in kids:
                demand += borrowed[k]
                kid_mins += mins[k]
            if demand == 0:
                continue
            from_pool = min(demand, max(0, mins[i] - kid_mins))
            lent[i] += from_pool
            rest = demand - from_pool
            if rest:
                lendable = {}
                for k in kids:
                    cap = lends[k]
                    lendable[order[k]] = unused[k] if cap is None else min(unused[k], cap)
                for name, share in allocate(rest, lendable).items():
                    lent[self.index[name]] += share
                    rest -= share
                if rest:
                    beyond = {order[k]: unused[k] - lendable[order[k]] for k in kids}
                    for name, share in allocate(rest, beyond).items():
                        lent[self.index[name]] += share
                        rest -= share
            lent[i] += rest  # borrowed from above (or over capacity) and passed down
        caps = [0] * n
        for i in range(n):
            p = parent[i]
            own = maxes[i]
            caps[i] = own if own is not None else (caps[p] if p is not None else mins[i])
        return [
            (mins[i], caps[i], used[i], borrowed[i], lent[i], max(0, used[i] - caps[i]))
            for i in range(n)
        ]


class FlavorUsage:
    """One flavor's usage over one tree, kept current as leaves change: a leaf's change
    recomputes only the path to the root and the lending among each path node's children,
    not the whole tree (the quota projection does this at every change point).

    :meth:`row` gives the same numbers as :meth:`UsageCalculator.numbers`, plus the
    subtree's counts (queued demand, running jobs, queued jobs).
    """

    def __init__(self, calc: UsageCalculator, flavor: str) -> None:
        mins, maxes, lends = calc._compiled(flavor)
        n = len(calc.order)
        self.calc = calc
        self.mins = mins
        self.lends = lends
        parent, children = calc.parent, calc.children
        self.caps = caps = [0] * n
        for i in range(n):
            p, own = parent[i], maxes[i]
            caps[i] = own if own is not None else (caps[p] if p is not None else mins[i])
        self.kid_mins = [sum(mins[k] for k in children[i]) for i in range(n)]
        self.total = [0] * n  # a leaf's usage (idle-mode part included)
        self.idle = [0] * n
        self.used = [0] * n
        self.borrowed = [0] * n
        self.unused = list(mins)
        self.lent_down = [0] * n  # supplied to its children (shared pool + passed down)
        self.lent_up = [0] * n  # its share of what its parent's children borrow
        self.counts = [[0, 0, 0] for _ in range(n)]  # queued, running_jobs, queued_jobs
        self._dirty: set[int] = set()
        self._paths: dict[int, tuple[int, ...]] = {}
        self.changed: set[int] = set()

    def set_leaf(
        self, i: int, total: int, idle: int, queued: int, running: int, queued_jobs: int
    ) -> None:
        """Set leaf ``i``'s own usage and counts; :meth:`settle` recomputes."""
        if total != self.total[i] or idle != self.idle[i]:
            self.total[i] = total
            self.idle[i] = idle
            self._dirty.add(i)
        c = self.counts[i]
        dq, dr, dj = queued - c[0], running - c[1], queued_jobs - c[2]
        if dq or dr or dj:
            parent, counts, changed = self.calc.parent, self.counts, self.changed
            node: int | None = i
            while node is not None:
                up = counts[node]
                up[0] += dq
                up[1] += dr
                up[2] += dj
                changed.add(node)
                node = parent[node]

    def settle(self) -> set[int]:
        """Recompute after :meth:`set_leaf` calls; returns (and forgets) the nodes whose
        numbers changed since the last call."""
        dirty = self._dirty
        if dirty:
            calc = self.calc
            parent, children = calc.parent, calc.children
            if len(dirty) == 1:
                path: Sequence[int] = self._path(next(iter(dirty)))
            else:
                nodes: set[int] = set()
                for leaf in dirty:
                    nodes.update(self._path(leaf))
                path = sorted(nodes, reverse=True)  # children before parents
            dirty.clear()
            mins, used, borrowed, unused = self.mins, self.used, self.borrowed, self.unused
            changed = self.changed
            lenders: set[int] = set()  # parents whose children's borrowed / unused moved
            for i in path:
                kids = children[i]
                if kids:
                    total = 0
                    for k in kids:
                        total += used[k]
                    regular, extra = total, 0
                else:
                    total = self.total[i]
                    extra = min(total, self.idle[i])
                    regular = total - extra
                p = parent[i]
                b = max(0, regular - mins[i]) + extra if p is not None else 0
                u = max(0, mins[i] - regular)
                if total != used[i] or b != borrowed[i]:
                    changed.add(i)
                if p is not None and (b != borrowed[i] or u != unused[i]):
                    lenders.add(p)
                used[i], borrowed[i], unused[i] = total, b, u
            for p in lenders:
                self._lend(p)
        out = set(self.changed)
        self.changed.clear()
        return out

    def _path(self, leaf: int) -> tuple[int, ...]:
        found = self._paths.get(leaf)
        if found is None:
            nodes = []
            node: int | None = leaf
            while node is not None:
                nodes.append(node)
                node = self.calc.parent[node]
            found = self._paths[leaf] = tuple(nodes)
        return found

    def _lend(self, p: int) -> None:
        """Split the borrowing of ``p``'s children among its pool, its children, above."""
        kids = self.calc.children[p]
        borrowed, lent_up, changed = self.borrowed, self.lent_up, self.changed
        demand = 0
        for k in kids:
            demand += borrowed[k]
        if not demand:
            if self.lent_down[p]:
                self.lent_down[p] = 0
                changed.add(p)
            for k in kids:
                if lent_up[k]:
                    lent_up[k] = 0
                    changed.add(k)
            return
        order, index = self.calc.order, self.calc.index
        unused, lends = self.unused, self.lends
        shares = dict.fromkeys(kids, 0)
        from_pool = min(demand, max(0, self.mins[p] - self.kid_mins[p]))
        rest = demand - from_pool
        if rest:
            lendable: dict[str, int] = {}
            for k in kids:
                cap = lends[k]
                lendable[order[k]] = unused[k] if cap is None else min(unused[k], cap)
            for name, share in allocate(rest, lendable).items():
                shares[index[name]] += share
                rest -= share
            if rest:
                beyond = {order[k]: unused[k] - lendable[order[k]] for k in kids}
                for name, share in allocate(rest, beyond).items():
                    shares[index[name]] += share
                    rest -= share
        down = from_pool + rest
        if down != self.lent_down[p]:
            self.lent_down[p] = down
            changed.add(p)
        for k, share in shares.items():
            if share != lent_up[k]:
                lent_up[k] = share
                changed.add(k)

    def row(self, i: int) -> tuple[int, ...]:
        """(min, max, used, borrowed, lent, queued, running_jobs, queued_jobs, over_admitted)."""
        used, cap, c = self.used[i], self.caps[i], self.counts[i]
        return (
            self.mins[i],
            cap,
            used,
            self.borrowed[i],
            self.lent_down[i] + self.lent_up[i],
            c[0],
            c[1],
            c[2],
            max(0, used - cap),
        )
