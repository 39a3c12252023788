"""Fuzz: hypothesis-generated messages through the real ingest (Tansu + PostgreSQL).

Good messages are built from the catalogue with values inside their bounds; poison ones
are good messages with one thing broken (an extreme integer, NaN, NUL, a lone surrogate,
an instant at either end of datetime's range, a huge string, a non-cluster type, a foreign
source). Whatever the mix: ingest returns, every good message is stored, every other
message is a dead letter at its offset, the checkpoint covers the whole log, and every
projection catches up over what was stored. Examples are few (CI): each one is a topic.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumers.ingest import run_ingest
from consumers.projector import Projector
from consumers.topics import ensure_topic
from ledger.bounds import (
    EARLIEST,
    LATEST,
    MAX_CPU_MILLI,
    MAX_LABEL_VALUE,
    MAX_MEMORY_MIB,
    MAX_MGPU,
    MAX_NODE_GPUS,
    MAX_PRIORITY,
    MAX_REPLICAS,
    MIN_PRIORITY,
)
from ledger.catalogue import registered_types
from ledger.events import CLUSTER_FACT_TYPES, JOB_LIFECYCLE_TYPES
from ledger.store.postgres import PostgresEventStore
from projections.registry import all_projections
from tests.support.kafka import produce, stored_ids

# printable, storable text: no NUL, no surrogates (the poison adds those)
TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=MAX_LABEL_VALUE
)
NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=40)


def _bounded(high: int, low: int = 0) -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from([low, high]), st.integers(low, high))


INSTANT = st.datetimes(
    min_value=EARLIEST.replace(tzinfo=None),
    max_value=(LATEST - timedelta(microseconds=1)).replace(tzinfo=None),
    timezones=st.just(UTC),
)


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


@st.composite
def good_messages(draw: st.DrawFn) -> dict[str, Any]:
    """A cluster fact a watcher could send, every value inside its bound."""
    kind = draw(st.sampled_from(sorted(CLUSTER_FACT_TYPES)))
    uid, at = draw(NAME), draw(INSTANT)
    resources = {
        "mgpu": draw(_bounded(MAX_MGPU)),
        "cpu_milli": draw(_bounded(MAX_CPU_MILLI)),
        "memory_mib": draw(_bounded(MAX_MEMORY_MIB)),
    }
    attribution = {"workspace": draw(TEXT), "user": draw(TEXT), "flavor": draw(TEXT)}
    if kind.startswith("Node"):
        stream = f"node/{uid}"
        data: dict[str, Any] = {"node": uid}
        if kind == "NodeRegistered":
            data |= {
                "gpus": draw(_bounded(MAX_NODE_GPUS)),
                "cpu_milli": resources["cpu_milli"],
                "memory_mib": resources["memory_mib"],
                "pool": draw(TEXT),
            }
    else:
        stream = f"job/{uid}"
        data = {"job_uid": uid}
        if kind == "JobSubmitted":
            replica = {**resources, "count": draw(_bounded(MAX_REPLICAS)), "flavor": draw(TEXT)}
            data |= {
                "name": draw(NAME),
                "workspace": attribution["workspace"],
                "user": attribution["user"],
                "priority": draw(_bounded(MAX_PRIORITY, MIN_PRIORITY)),
                "replicas": [replica],
            }
        elif kind in JOB_LIFECYCLE_TYPES:
            data |= {"by": "kubernetes", "reason": draw(st.none() | TEXT)}
        elif kind == "WorkloadCreated":
            replica = {**resources, "count": draw(_bounded(MAX_REPLICAS)), "flavor": draw(TEXT)}
            data |= {
                "name": draw(NAME),
                "workspace": attribution["workspace"],
                "user": attribution["user"],
                "priority": draw(_bounded(MAX_PRIORITY, MIN_PRIORITY)),
                "replicas": draw(_bounded(MAX_REPLICAS)),
                "replica": replica,
            }
        elif kind == "WorkloadScaled":
            data |= {
                "from_replicas": draw(_bounded(MAX_REPLICAS)),
                "to_replicas": draw(_bounded(MAX_REPLICAS)),
            }
        elif kind == "WorkloadUpdated":
            replica = {**resources, "count": draw(_bounded(MAX_REPLICAS)), "flavor": draw(TEXT)}
            data |= {"revision": draw(NAME), "replica": replica}
        elif kind == "WorkloadDeleted":
            pass
        elif kind == "OccupancyStarted":
            data |= {
                "occupancy_id": draw(NAME),
                "pod_uid": draw(NAME),
                "started_at": _iso(at),
                **resources,
                **attribution,
            }
        else:  # OccupancyEnded
            data |= {"occupancy_id": draw(NAME), "pod_uid": draw(NAME), "ended_at": _iso(at)}
    return {
        "event_id": str(uuid.uuid4()),
        "type": kind,
        "schema_version": 1,
        "stream": stream,
        "occurred_at": _iso(at),
        "observed_at": _iso(at),
        "source": "kube-watcher/fuzz",
        "data": data,
    }


EXTREME_INTS = st.sampled_from([2**64, 2**63, -(2**63) - 1, 2**62, 10**30, -1, MAX_MGPU + 1])
EDGE_INSTANTS = st.sampled_from(
    [
        "9999-12-31T23:59:59-01:00",
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59.999999Z",
        "0001-01-01T00:00:00Z",
        "1969-12-31T23:59:59.999999Z",
        "2200-01-01T00:00:00Z",
    ]
)
SURROGATE = "\udcff-lone"  # written as a JSON \\u escape: orjson cannot encode it


@st.composite
def poison_messages(draw: st.DrawFn) -> bytes:
    """A good message with one thing broken, as wire bytes."""
    message = draw(good_messages())
    data = message["data"]
    how = draw(
        st.sampled_from(
            [
                "int",
                "nan",
                "nul-data",
                "nul-source",
                "surrogate",
                "instant",
                "huge",
                "oversized",
                "type",
                "source",
                "label",
            ]
        )
    )
    if how == "int":
        # orjson cannot write integers beyond 64 bits: put the digits in by hand
        field = next((k for k in ("mgpu", "gpus", "priority") if k in data), None)
        if field is None:
            message["schema_version"] = "EXTREME"
        else:
            data[field] = "EXTREME"
        digits = str(draw(EXTREME_INTS)).encode()
        return orjson.dumps(message).replace(b'"EXTREME"', digits)
    elif how == "nan":
        return orjson.dumps(message).replace(b'"schema_version":1', b'"schema_version":NaN')
    elif how == "nul-data":
        key = next(k for k, v in data.items() if isinstance(v, str))
        data[key] += "\x00"
    elif how == "nul-source":
        message["source"] = f"kube-watcher/{draw(TEXT)}\x00"
    elif how == "surrogate":
        message["source"] = "kube-watcher/SURROGATE"
        return orjson.dumps(message).replace(b"SURROGATE", b"\\udcff")
    elif how == "instant":
        message[draw(st.sampled_from(["occurred_at", "observed_at"]))] = draw(EDGE_INSTANTS)
    elif how == "huge":
        message["source"] = "kube-watcher/" + "x" * 300_000
    elif how == "oversized":
        message["data"] = {**data, "reason": "x" * 1_100_000}
    elif how == "type":
        others = sorted(set(registered_types()) - CLUSTER_FACT_TYPES)
        message["type"] = draw(st.sampled_from(others))
    elif how == "source":
        message["source"] = draw(st.sampled_from(["api/mallory", "dispatcher", "kube-watcher"]))
    else:  # a label value longer than Kubernetes allows
        if "workspace" in data:
            data["workspace"] = "w" * (MAX_LABEL_VALUE + 1)
        else:
            message["occurred_at"] = "1900-01-01T00:00:00Z"
    return orjson.dumps(message)


MESSAGES = st.lists(
    st.one_of(
        good_messages().map(lambda m: (True, m)), poison_messages().map(lambda b: (False, b))
    ),
    min_size=1,
    max_size=25,
)


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(messages=MESSAGES)
def test_fuzzed_messages_are_stored_or_dead_lettered_and_ingest_goes_on(
    store: PostgresEventStore, bootstrap: str, messages: list[tuple[bool, Any]]
) -> None:
    topic = f"fuzz-{uuid.uuid4().hex[:10]}"
    ensure_topic(bootstrap, topic, partitions=1)  # one log: offsets name the messages
    wire = [orjson.dumps(m) if good else m for good, m in messages]
    before = {d.id for d in store.dead_letters()}
    known = set(stored_ids(store))
    produce(bootstrap, topic, [(b"k", value) for value in wire])

    stats = run_ingest(
        store,
        bootstrap,
        topic,
        f"g-{topic}",
        partitions=[0],
        max_messages=len(wire),
        idle_timeout=30,
    )

    assert stats.messages == len(wire)
    good_ids = {uuid.UUID(m["event_id"]) for good, m in messages if good}
    assert good_ids <= set(stored_ids(store))
    letters = [d for d in store.dead_letters() if d.id not in before and d.topic == topic]
    poison_offsets = {i for i, (good, _) in enumerate(messages) if not good}
    assert {d.offset for d in letters} == poison_offsets
    assert len(set(stored_ids(store)) - known) == len(good_ids)
    with store.transaction() as uow:
        offsets = uow.load_checkpoint(f"ingest:g-{topic}").offsets
    assert offsets == {f"{topic}:0": len(wire)}
    # and what was accepted, the read models take
    Projector(store, all_projections()).catch_up()
