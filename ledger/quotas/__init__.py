"""Quota rules, with no IO: the quota tree, its file format, validation, diffs and usage.

An operator edits a quota tree as YAML (the demo's: ``dlc_ledger/resources/quotas/demo.yaml``)
and applies it; the tree becomes ``QuotaCreated`` / ``QuotaChanged`` / ``QuotaDeleted`` /
``WorkspaceBound`` events.
Everything here is a pure function of plain values, so the apply command, the quota
projection and the tests share one definition of "valid tree", "what changed" and "who
borrows from whom":

- :mod:`~ledger.quotas.model`: the tree (specs, bindings), units, parents-first order;
- :mod:`~ledger.quotas.document`: the file format (a parsed document into a tree);
- :mod:`~ledger.quotas.validate`: the rules a tree keeps;
- :mod:`~ledger.quotas.diff`: the events from one tree to another (apply, ``--prune``);
- :mod:`~ledger.quotas.flavors`: which quota key a flavor's usage counts against;
- :mod:`~ledger.quotas.spillover`: which service replica runs beyond its quota, on public;
- :mod:`~ledger.quotas.usage`: used, borrowed, lent, max and over-admission (two engines:
  a whole tree at once, and one flavor kept current as leaves change).

Units (one per resource key, integers only, never fractions): ``gpu/<model>`` and
``gpu/any`` in milli-GPU (1 GPU = 1000), ``cpu`` in milli-cores, ``memory`` in MiB.
"""

from ledger.quotas.diff import diff, keep_absent
from ledger.quotas.document import build_quota_tree, quota_tree_from_document
from ledger.quotas.flavors import counted_flavor, counting_flavors
from ledger.quotas.model import (
    NO_QUOTA,
    RESOURCE_UNITS,
    QuotaTree,
    QuotaTreeError,
    resource_unit,
    spec_hash,
    topological_order,
)
from ledger.quotas.spillover import spills
from ledger.quotas.usage import (
    FlavorUsage,
    NodeUsage,
    UsageCalculator,
    allocate,
    compute_usage,
    lent_outside,
    unused_offered,
    within_lend_limit,
)
from ledger.quotas.validate import validate_tree

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
    "lent_outside",
    "quota_tree_from_document",
    "resource_unit",
    "spec_hash",
    "spills",
    "topological_order",
    "unused_offered",
    "validate_tree",
    "within_lend_limit",
]
