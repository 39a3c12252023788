"""No 5xx on any input: schemathesis calls every GET operation the app publishes with the
values a careless or hostile client sends — instants over the whole of ISO 8601's years
(0001-9999) with any offset, windows wider than their caps, integers at and past 64 bits,
``nan`` and ``inf``, cursors wrapping such numbers — and no answer may be a 5xx
(issue 37).

The schema conformance of ordinary values is ``test_schemathesis.py``'s; this file reuses
its seeded database and path values (so requests reach the reads, not only a 404) and
replaces one parameter of a valid query, a window, or any subset, with extremes. With
instants allowed over 0001-9999, it found the year-9999 500s of ``/v1/quotas/tree`` and
``/v1/month-to-date`` in 9 of 11 runs (docs/api.md, "Schema conformance").
"""

from __future__ import annotations

import base64
import json
import re
from datetime import datetime
from typing import Any

import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode, checks

from dlc_ledger.api.app import openapi_document
from projections.billing.reports import GROUP_KEYS
from tests.dlc_ledger.api.test_schemathesis import SEEDED_PATHS, seeded

__all__ = ["seeded"]  # the module-scoped fixture, one seeded database for this module too

#: per operation: hypothesis draws simple values first, and at 25 the extremes found the
#: year-9999 500s in 1 run of 5, at 40 in 9 of 11 (about 15 s in all, where
#: test_schemathesis.py's 15 examples and coverage phase take 25)
MAX_EXAMPLES = 40
#: conformance of the answers is test_schemathesis.py's: here only that none is a 5xx
CHECKS = [checks.not_a_server_error]

schema = schemathesis.openapi.from_dict(json.loads(openapi_document())).include(method="GET")
# every example a draw of the extremes below: the boundary values of the coverage phase and
# the schema-invalid ones of the negative mode are test_schemathesis.py's (they would mostly
# be refused before an extreme reached a read)
schema.config.phases.coverage.enabled = False
schema.config.phases.examples.enabled = False
schema.config.generation.update(modes=[GenerationMode.POSITIVE])

_MINUTES = 24 * 60
_OFFSETS = st.one_of(
    st.just("Z"),
    st.integers(-_MINUTES + 1, _MINUTES - 1).map(
        lambda m: f"{'-' if m < 0 else '+'}{abs(m) // 60:02d}:{abs(m) % 60:02d}"
    ),
)
_ANY_YEAR = st.datetimes(datetime.min, datetime.max)
#: inside the accepted range too, so windows reach their caps and the reads behind them
_IN_RANGE = st.datetimes(datetime(1970, 1, 1), datetime(2199, 12, 31, 23, 59, 59))
#: where arithmetic overflows or a bound is crossed: the calendar's ends, the range's
_NEAR_EDGES = st.one_of(
    st.datetimes(datetime(9999, 12, 31), datetime.max),
    st.datetimes(datetime.min, datetime(1, 1, 2)),
    st.datetimes(datetime(2199, 12, 31, 23), datetime(2200, 1, 1, 1)),
    st.datetimes(datetime(1969, 12, 31, 23), datetime(1970, 1, 1, 1)),
)
#: the edges exactly, and what a parser must refuse: offsets past a day, no such date
_EDGE_INSTANTS = [
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00+23:59",
    "9999-12-31T00:00:00Z",
    "9999-12-31T23:59:59.999999Z",
    "9999-12-31T23:59:59.999999-23:59",
    "1969-12-31T23:59:59.999999Z",
    "1970-01-01T00:00:00Z",
    "1970-01-01T00:30:00+01:00",
    "2199-12-31T23:59:59.999999Z",
    "2200-01-01T00:00:00Z",
    "2026-11-01T00:00:00+24:00",
    "2026-11-01T00:00:00-99:99",
    "2026-02-30T00:00:00Z",
    "2026-11-01T24:00:00Z",
]
_NEAR = st.builds(lambda t, z: t.isoformat() + z, _NEAR_EDGES, _OFFSETS)
_ANYWHERE = st.builds(lambda t, z: t.isoformat() + z, st.one_of(_ANY_YEAR, _IN_RANGE), _OFFSETS)
#: the edges drawn twice as often as the rest: where the bugs were
INSTANTS = st.one_of(st.sampled_from(_EDGE_INSTANTS), _NEAR, _ANYWHERE)
_EDGE_INTEGERS = [
    2**31 - 1,
    2**31,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64,
    10**100,
    -1,
    0,
]
INTEGERS = st.one_of(st.sampled_from(_EDGE_INTEGERS), st.integers())
NUMBERS = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "1e308", "1e309", "-0", "5e-324"]),
    INTEGERS.map(str),
)


def _cursor(key: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")


#: a cursor is opaque, but a client can decode one and put any number back
CURSORS = st.one_of(
    INTEGERS.map(str),
    st.lists(st.one_of(INTEGERS, st.text(max_size=5), st.none()), max_size=4).map(_cursor),
)


def _extreme(parameter: dict[str, Any]) -> st.SearchStrategy[str] | None:
    """The extremes for one query parameter, by its schema (None: schemathesis' own)."""
    name, text = parameter["name"], json.dumps(parameter.get("schema", {}))
    if '"date-time"' in text:
        return INSTANTS
    if name == "cursor":
        return CURSORS
    if name == "group_by":  # valid keys, so a window reaches its cap by group
        return st.lists(st.sampled_from(GROUP_KEYS), min_size=1, unique=True).map(",".join)
    if '"integer"' in text:
        return INTEGERS.map(str)
    if '"number"' in text:
        return NUMBERS
    return None


@schema.hook
def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any]) -> Any:
    names = re.findall(r"\{([^}:]+)", context.operation.path)
    if not names or not all(name in SEEDED_PATHS for name in names):
        return st.just(path_parameters)
    seeded_values = st.fixed_dictionaries({n: st.sampled_from(SEEDED_PATHS[n]) for n in names})
    return st.one_of(st.just(path_parameters), seeded_values)


#: answered before the route runs (a position beyond the head is a 400): drawn as an
#: extreme only, never left in from the generated query to mask another parameter's
_GATES = ("min_position", "wait")


@schema.hook
def flatmap_query(context: Any, query: dict[str, Any] | None) -> Any:
    """The generated (valid) query with one parameter, or a window, replaced by extremes:
    a request refused for one value (a 422) must not hide what another would have done."""
    extremes = {
        p.name: strategy
        for p in context.operation.query
        if (strategy := _extreme(p.definition)) is not None
    }
    if not extremes:
        return st.just(query)
    base = {k: v for k, v in (query or {}).items() if k not in _GATES}
    one = st.sampled_from(sorted(extremes)).flatmap(
        lambda name: extremes[name].map(lambda value: {name: value})
    )
    # mostly one parameter at a time: several at once mostly meet a 422 first
    drawn = [one, one, st.fixed_dictionaries({}, optional=extremes)]
    if {"from", "to"} <= extremes.keys():  # a window inside the range: its cap, its read
        inside = st.builds(lambda t, z: t.isoformat() + z, _IN_RANGE, _OFFSETS)
        drawn.append(st.fixed_dictionaries({"from": inside, "to": inside}))
    return st.one_of(drawn).map(lambda values: {**base, **values})


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_no_extreme_value_is_a_server_error(
    case: Any, seeded: tuple[FastAPI, dict[str, str]]
) -> None:
    app, headers = seeded
    case.call_and_validate(app=app, headers=headers, checks=CHECKS)
