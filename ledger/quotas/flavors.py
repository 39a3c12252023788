"""Flavor fungibility: which key of a quota a flavor's usage (or demand) counts against.

Usage of ``gpu/<model>`` counts against a quota's ``gpu/<model>`` entry when the quota names
that key itself, else against its ``gpu/any``, as a Kueue ClusterQueue admits only flavors it
lists; the same fallback as a price book's (:func:`ledger.prices.lookup_keys`).
"""

from __future__ import annotations

from collections.abc import Iterable

from ledger.events import QuotaSpec
from ledger.prices import lookup_keys

__all__ = ["counted_flavor", "counting_flavors"]


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
