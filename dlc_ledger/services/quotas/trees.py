"""Applying a quota tree: diff a file against the projected tree, append the differences."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from dlc_ledger.services.clocks import observed_cluster_time
from dlc_ledger.services.yaml_files import parse_quota_tree
from ledger.applies import ApplyChange, apply_envelopes
from ledger.canonical import format_timestamp
from ledger.envelopes import Envelope, EventData
from ledger.errors import Invalid
from ledger.events import QuotaChanged, QuotaCreated, QuotaDeleted, QuotaSpec, WorkspaceBound
from ledger.quotas import QuotaTree, diff, keep_absent, spec_hash, validate_tree
from ledger.store.base import EventStore
from ledger.subscriptions import capacity_problems, capacity_shortfalls, group_capacity
from projections.quotas import QuotaProjection, quota_tree
from projections.registry import catch_up_all
from projections.steps import catch_up
from projections.subscriptions import load_subscriptions

__all__ = [
    "ApplyResult",
    "apply_quota_file",
    "catch_up_quotas",
    "current_tree",
    "describe",
    "format_quantities",
    "lands_inside_history",
    "quota_envelopes",
]


def _stream(event: EventData) -> tuple[str, str]:
    """(stream, what-changes digest) of one apply event."""
    if isinstance(event, (QuotaCreated, QuotaChanged)):
        return f"quota/{event.spec.quota_id}", spec_hash(event.spec)
    if isinstance(event, QuotaDeleted):
        return f"quota/{event.quota_id}", "deleted"
    if isinstance(event, WorkspaceBound):
        return f"workspace/{event.workspace}", event.quota or "-"
    raise TypeError(f"not an apply event: {type(event).__name__}")


def quota_envelopes(
    store: EventStore,
    events: list[EventData],
    *,
    at: datetime,
    source: str,
) -> tuple[list[Envelope], dict[str, int]]:
    """Envelopes for ``events`` and the stream versions the append must find
    (:func:`ledger.applies.apply_envelopes`: the one rule for every apply)."""
    changes = [ApplyChange(event, *_stream(event)) for event in events]
    return apply_envelopes(changes, store.stream_version, at=at, source=source)


def catch_up_quotas(store: EventStore) -> None:
    """The quota projection to the head: a write use case's step (an apply diffs against
    the tree as stored, and its reader reads what it applied)."""
    catch_up(store, [QuotaProjection()])


def current_tree(store: EventStore) -> QuotaTree:
    """The quota tree as projected (a read: no catch-up)."""
    with store.snapshot() as uow:
        return quota_tree(uow.connection)


def format_quantities(values: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(values.items())) or "-"


def _changes(old: QuotaSpec, new: QuotaSpec) -> str:
    parts = []
    a, b = old.model_dump(mode="json"), new.model_dump(mode="json")
    for field in (
        "parent",
        "min",
        "max",
        "lend_limit",
        "preemption",
        "queue_policy",
        "balance_timeout",
        "aging_interval",
        "fair_sharing_weight",
        "fair_sharing",
    ):
        if a[field] != b[field]:
            if isinstance(a[field], dict) and isinstance(b[field], dict):
                for key in sorted(set(a[field]) | set(b[field])):
                    if a[field].get(key) != b[field].get(key):
                        parts.append(
                            f"{field}.{key} {a[field].get(key, '-')} -> {b[field].get(key, '-')}"
                        )
            else:
                parts.append(f"{field} {a[field]} -> {b[field]}")
    if old.on_unfit_head != new.on_unfit_head:
        # left out of the dump when it is the default (Retry), so compared here
        parts.append(f"on_unfit_head {old.on_unfit_head} -> {new.on_unfit_head}")
    if old.resource_groups != new.resource_groups:
        was = ", ".join(old.resource_groups) or "public capacity"
        parts.append(f"draws on {', '.join(new.resource_groups) or 'public capacity'} (was {was})")
    return "; ".join(parts)


def describe(current: QuotaTree, event: EventData) -> str:
    """One human line per apply event."""
    if isinstance(event, QuotaCreated):
        s = event.spec
        return (
            f"created quota {s.quota_id} (parent {s.parent or '-'}; "
            f"min {format_quantities(s.min)}; max {format_quantities(s.max)}"
            + (f"; draws on {', '.join(s.resource_groups)})" if s.resource_groups else ")")
        )
    if isinstance(event, QuotaChanged):
        return (
            f"changed quota {event.spec.quota_id}: "
            f"{_changes(current.specs[event.spec.quota_id], event.spec)}"
        )
    if isinstance(event, QuotaDeleted):
        return f"deleted quota {event.quota_id}"
    if isinstance(event, WorkspaceBound):
        was = current.bindings.get(event.workspace, "-")
        if event.quota is None:
            return f"unbound workspace {event.workspace} (was {was})"
        return f"bound workspace {event.workspace} to {event.quota} (was {was})"
    return type(event).__name__


@dataclass(frozen=True)
class ApplyResult:
    """What an apply did (or, dry-run, would do)."""

    lines: list[str]  # one human line per event
    events: list[Envelope]  # appended, or (dry-run) that would be
    # absent from the file and not pruned:
    kept_quotas: list[str] = dataclasses.field(default_factory=list)
    kept_bindings: list[str] = dataclasses.field(default_factory=list)
    # guarantees beyond the subscribed capacity they draw on, applied with force
    over_capacity: list[str] = dataclasses.field(default_factory=list)


def apply_quota_file(
    store: EventStore,
    text: str,
    *,
    principal: str,
    at: datetime | None = None,
    dry_run: bool = False,
    prune: bool = False,
    force: bool = False,
) -> ApplyResult:
    """Diff ``text`` against the projected tree; append the differences unless dry-run.

    Quotas and workspace bindings the file leaves out are kept unless ``prune``; the
    events take effect at ``at`` (cluster time; default now) and name ``principal``
    (who applied it, e.g. ``api/alice``) as their source. A tree whose guarantees exceed
    the subscribed capacity of the resource groups they name (at ``at``) is refused
    unless ``force``, which applies it and reports the shortfalls in ``over_capacity``.
    """
    desired = parse_quota_tree(text)
    catch_up_quotas(store)
    current = current_tree(store)
    kept_quotas: list[str] = []
    kept_bindings: list[str] = []
    if not prune:
        desired, kept_quotas, kept_bindings = keep_absent(current, desired)
    return _apply_tree(
        store, current, desired, principal=principal, at=at, dry_run=dry_run, force=force,
        kept=(kept_quotas, kept_bindings),
    )  # fmt: skip


def draw_on_groups(
    store: EventStore,
    draws: Mapping[str, Sequence[str]],
    *,
    principal: str,
    at: datetime | None = None,
    dry_run: bool = False,
    force: bool = False,
) -> ApplyResult:
    """Make each quota of ``draws`` draw on the resource groups listed for it (an empty
    list: public capacity again), the rest of the tree as applied; checked and appended
    as :func:`apply_quota_file` does."""
    catch_up_quotas(store)
    current = current_tree(store)
    unknown = sorted(set(draws) - set(current.specs))
    if unknown:
        raise Invalid(
            f"unknown quota(s) {', '.join(unknown)} (known: {', '.join(sorted(current.specs))})"
        )
    specs = dict(current.specs)
    for quota, groups in draws.items():
        specs[quota] = specs[quota].model_copy(
            update={"resource_groups": tuple(sorted(set(groups)))}
        )
    desired = QuotaTree(specs=specs, bindings=current.bindings)
    return _apply_tree(
        store, current, desired, principal=principal, at=at, dry_run=dry_run, force=force
    )


def add_quota(
    store: EventStore,
    spec: QuotaSpec,
    workspaces: Sequence[str] = (),
    *,
    principal: str,
    at: datetime | None = None,
) -> ApplyResult:
    """Add the quota ``spec`` under its parent in the tree as applied (resource groups,
    bindings and all), and bind ``workspaces`` to it; checked and appended as
    :func:`apply_quota_file` does. An operator's change in a running world (a quota for a
    new product), where a file would have to restate the whole tree as it stands."""
    catch_up_quotas(store)
    current = current_tree(store)
    if spec.quota_id in current.specs:
        raise Invalid(f"quota {spec.quota_id!r} exists already")
    desired = QuotaTree(
        specs={**current.specs, spec.quota_id: spec},
        bindings={**current.bindings, **dict.fromkeys(workspaces, spec.quota_id)},
    )
    validate_tree(desired)
    # refused only for what the new quota adds to the tree's shortfalls: one that is there
    # already (a subscription cancelled under a drawing quota) is not its to mend
    instant = at or datetime.now(UTC)
    before = set(_over_capacity(store, current, instant))
    added = [p for p in _over_capacity(store, desired, instant) if p not in before]
    if added:
        raise Invalid(
            f"quota {spec.quota_id!r} would guarantee more than its resource groups hold: "
            + "; ".join(added)
        )
    return _apply_tree(
        store, current, desired, principal=principal, at=at, dry_run=False, force=True
    )


def _apply_tree(
    store: EventStore,
    current: QuotaTree,
    desired: QuotaTree,
    *,
    principal: str,
    at: datetime | None,
    dry_run: bool,
    force: bool,
    kept: tuple[list[str], list[str]] = ([], []),
) -> ApplyResult:
    events = diff(current, desired)
    lines = [describe(current, e) for e in events]
    over = _over_capacity(store, desired, at or datetime.now(UTC)) if events else []
    if over and not force:
        raise Invalid(
            "the tree guarantees more than its resource groups hold: "
            + "; ".join(over)
            + " (buy subscriptions first, or pass --force to apply it anyway)"
        )
    envelopes: list[Envelope] = []
    if events:
        envelopes, expected = quota_envelopes(
            store, events, at=at or datetime.now(UTC), source=principal
        )
        if not dry_run:
            store.append(envelopes, expected_versions=expected)
            catch_up_all(store)  # the reads after an apply see it
    return ApplyResult(lines, envelopes, kept[0], kept[1], over)


def _over_capacity(store: EventStore, tree: QuotaTree, at: datetime) -> list[str]:
    if not any(spec.resource_groups for spec in tree.specs.values()):
        return []
    capacity = group_capacity(load_subscriptions(store).values(), at)
    return capacity_problems(tree.specs, capacity)


def over_capacity_quotas(store: EventStore, at: datetime) -> dict[str, str]:
    """The quotas of the applied tree whose guarantee exceeds the subscribed capacity they
    draw on at ``at`` (a subscription expired or was cancelled, or --force), with why."""
    tree = current_tree(store)
    if not any(spec.resource_groups for spec in tree.specs.values()):
        return {}
    capacity = group_capacity(load_subscriptions(store).values(), at)
    out: dict[str, str] = {}
    for quotas, message in capacity_shortfalls(tree.specs, capacity):
        for quota in quotas:
            out.setdefault(quota, message)
    return out


def lands_inside_history(store: EventStore, at: datetime) -> str | None:
    """A warning when ``at`` falls before cluster facts already stored (a replay's
    history lies in virtual time, often ahead of the wall clock)."""
    observed = observed_cluster_time(store)
    if observed is None or observed <= at:
        return None
    return (
        f"note: the store holds cluster facts up to {format_timestamp(observed)}, after "
        f"{format_timestamp(at)}: the change takes effect inside that history "
        "(pass --effective-at to place it, e.g. at a replay's start)"
    )
