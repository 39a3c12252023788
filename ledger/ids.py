"""Deterministic identifiers.

A fact with a natural identity (a pod bound to a node, a job that succeeded) gets
the same ``event_id`` however often it is observed: a re-list, a watcher restart
or a Kafka redelivery then collapses into one stored copy.

The namespace below is fixed forever; changing it would fork every id.
"""

from __future__ import annotations

import uuid

from ledger.errors import Invalid

__all__ = ["LEDGER_NAMESPACE", "deterministic_id", "fact_event_id"]

#: uuid5(NAMESPACE_URL, "https://dlc-ledger.dev/ids/v1"), frozen.
LEDGER_NAMESPACE = uuid.UUID("daf03b6d-60f2-502c-9137-4011bb60be31")


def deterministic_id(*parts: str) -> uuid.UUID:
    """uuid5 over the parts joined by ``\\x1f`` (unit separator, never in a name)."""
    for part in parts:
        if "\x1f" in part:
            raise Invalid(f"id part {part!r} contains the unit separator")
    return uuid.uuid5(LEDGER_NAMESPACE, "\x1f".join(parts))


def fact_event_id(cluster: str, kind: str, object_uid: str, transition: str) -> uuid.UUID:
    """The id of an observed cluster fact: (cluster, kind, object uid, transition)."""
    return deterministic_id("fact", cluster, kind, object_uid, transition)
