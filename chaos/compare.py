"""Comparing the chaos run with the clean run: facts as multisets, reports row by row.

Facts are compared by what a watcher observed — (type, stream, cluster time, data) — since
their ids' inputs, ``observed_at`` and ``recorded_at`` are the watcher's and the store's
clocks. A fact in the clean run and missing from the chaos run is lost; one more often in
the chaos run is doubled. A report is compared byte for byte; where it differs, its rows
are compared without the fields that say when or in which order the store received a fact
rather than what happened (:data:`VOLATILE`), and the rows that still differ are counted
(rows of one and not the other, as multisets); a differing exit code counts as one row.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Comparison", "Deliveries", "compare", "compare_deliveries"]

#: reports whose text names the run itself (positions, hashes, timings): only their exit
#: codes are compared
EXIT_ONLY = ("verify",)

#: fields that describe the store's, the notifier's or the billing tick's timing, not the
#: facts: a store position (the interleaving of partitions and watches), ``late`` (stored
#: after a later fact of the same job: the pod and job watches race), ``recorded_at`` (the
#: store's clock), an invoice's ``issued_at`` (the cluster instant the billing tick that
#: closed the period happened to run at); a delivery's wall-clock times, its attempts and
#: last error (a retry after a fault: at least once is the promise) and its target (the
#: run's own receiver, on a port of its own)
VOLATILE = frozenset(
    {
        "position",
        "late",
        "recorded_at",
        "issued_at",
        "queued_at",
        "finished_at",
        "next_attempt_at",
        "latency_ms",
        "attempts",
        "last_error",
        "target",
    }
)


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


@dataclass
class Comparison:
    lost: int = 0
    doubled: int = 0
    extra: int = 0
    differing_rows: int = 0
    reports: int = 0
    differing: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)


def _rows(text: str) -> list[str]:
    try:
        document = _stable(json.loads(text))
    except ValueError:
        return text.splitlines()
    if isinstance(document, dict):
        lists = [v for v in document.values() if isinstance(v, list)]
        if len(lists) == 1:
            rest = {k: v for k, v in document.items() if not isinstance(v, list)}
            return [json.dumps(rest, sort_keys=True)] + [
                json.dumps(row, sort_keys=True) for row in lists[0]
            ]
        return [json.dumps(document, sort_keys=True)]
    if isinstance(document, list):
        return [json.dumps(row, sort_keys=True) for row in document]
    return [json.dumps(document)]


def compare(
    clean_facts: list[tuple[str, str, str, str]],
    chaos_facts: list[tuple[str, str, str, str]],
    clean_reports: dict[str, dict[str, Any]],
    chaos_reports: dict[str, dict[str, Any]],
) -> Comparison:
    result = Comparison()
    clean, chaos = Counter(clean_facts), Counter(chaos_facts)
    lost, over = clean - chaos, chaos - clean
    result.lost = sum(lost.values())
    result.doubled = sum(n for fact, n in over.items() if fact in clean)
    result.extra = sum(n for fact, n in over.items() if fact not in clean)
    for fact in list(lost)[:3]:
        result.examples.append(f"lost: {fact}")
    for fact in list(over)[:3]:
        result.examples.append(f"{'doubled' if fact in clean else 'extra'}: {fact}")
    for name in sorted(set(clean_reports) | set(chaos_reports)):
        result.reports += 1
        a, b = clean_reports.get(name), chaos_reports.get(name)
        if a is None or b is None:
            result.differing[name] = 1
            result.examples.append(f"{name}: only in the {'chaos' if a is None else 'clean'} run")
            continue
        rows = int(a["exit"] != b["exit"])
        if not name.startswith(EXIT_ONLY) and a["stdout"] != b["stdout"]:
            left, right = Counter(_rows(a["stdout"])), Counter(_rows(b["stdout"]))
            only_left, only_right = left - right, right - left
            rows += sum(only_left.values()) + sum(only_right.values())
            for row in list(only_left)[:1]:
                result.examples.append(f"{name}: clean has {row[:300]}")
            for row in list(only_right)[:1]:
                result.examples.append(f"{name}: chaos has {row[:300]}")
        if rows:
            result.differing[name] = rows
            result.differing_rows += rows
    return result


@dataclass(frozen=True)
class Deliveries:
    """Webhook deliveries: the clean run's notifications, those of the chaos run missing or
    extra (by webhook-id, type and data), and how many the chaos run delivered again."""

    delivered: int
    missing: int
    extra: int
    redelivered: int


def compare_deliveries(
    clean: list[tuple[str, str, str]], chaos: list[tuple[str, str, str]]
) -> Deliveries:
    want, got = set(clean), set(chaos)
    return Deliveries(
        delivered=len(want),
        missing=len(want - got),
        extra=len(got - want),
        redelivered=len(chaos) - len(got),
    )
