"""The dispatcher's latest decision about each job, folded from its decision events.

The live loop reads it to know what it already decided and has not yet seen confirmed
(an admission whose job the watchers still see queued, victims still occupying), so a
cycle never decides twice for the same pending episode (``attempt``: the job's
preemptions so far) and retries acting instead. ``jobs why`` reads the pending reasons.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import BigInteger, Column, Connection, DateTime, Integer, Table, Text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert

from ledger.store.base import RecordedEvent, UnitOfWork
from ledger.store.schema import metadata
from projections.base import Projection

__all__ = ["DispatchDecisionsProjection", "dispatch_decisions"]

dispatch_decisions = Table(
    "dispatch_decisions",
    metadata,
    Column("job_uid", Text, primary_key=True),
    # the job's pending episode the decision belongs to (its preemptions then)
    Column("attempt", Integer, nullable=False),
    # admit | pending | preempt (the job preempts) | victim (the job is preempted)
    Column("outcome", Text, nullable=False),
    Column("reason", Text),
    Column("quota", Text),
    Column("preemptor", Text),
    Column("victims", ARRAY(Text), nullable=False),
    # pending decisions stored in this episode (the next one's id counts on it)
    Column("pending_count", Integer, nullable=False),
    Column("decided_at", DateTime(timezone=True), nullable=False),
    Column("position", BigInteger, nullable=False),
)

_COLUMNS = tuple(c.name for c in dispatch_decisions.columns)


class DispatchDecisionsProjection(Projection):
    """Folds AdmissionDecided / PreemptionDecided into one row per job (the latest)."""

    name = "dispatch"
    cost = 0.05
    tables = (dispatch_decisions,)
    event_types = frozenset({"AdmissionDecided", "PreemptionDecided"})

    def apply(self, uow: UnitOfWork, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        rows: dict[str, dict[str, Any]] = {}
        for event in events:
            if event.type not in self.event_types:
                continue
            for row in decision_rows(event):
                uid = row["job_uid"]
                previous = rows.get(uid) or _stored(conn, uid)
                row["pending_count"] = _pending_count(previous, row)
                rows[uid] = row
        for uid in sorted(rows):
            stmt = pg_insert(dispatch_decisions).values(rows[uid])
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["job_uid"],
                    set_={c: stmt.excluded[c] for c in _COLUMNS if c != "job_uid"},
                )
            )


def _stored(conn: Connection, uid: str) -> dict[str, Any] | None:
    row = (
        conn.execute(dispatch_decisions.select().where(dispatch_decisions.c.job_uid == uid))
        .mappings()
        .first()
    )
    return dict(row) if row is not None else None


def _pending_count(previous: dict[str, Any] | None, row: dict[str, Any]) -> int:
    before = 0
    if previous is not None and previous["attempt"] == row["attempt"]:
        before = int(previous["pending_count"])
    return before + (1 if row["outcome"] == "pending" else 0)


def decision_rows(event: RecordedEvent) -> list[dict[str, Any]]:
    """The rows (without ``pending_count``) one decision event sets, one per job named."""
    data = event.data
    base = {"decided_at": event.occurred_at, "position": event.position, "pending_count": 0}
    if event.type == "AdmissionDecided":
        return [
            {
                **base,
                "job_uid": data["job_uid"],
                "attempt": int(data.get("attempt", 0)),
                "outcome": data["outcome"],
                "reason": data.get("reason"),
                "quota": data.get("quota"),
                "preemptor": None,
                "victims": [],
            }
        ]
    victims = list(data.get("victims", ()))
    rows = [
        {
            **base,
            "job_uid": data["preemptor"],
            "attempt": int(data.get("attempt", 0)),
            "outcome": "preempt",
            "reason": data.get("reason"),
            "quota": data.get("quota"),
            "preemptor": None,
            "victims": [v["job_uid"] for v in victims],
        }
    ]
    rows += [
        {
            **base,
            "job_uid": v["job_uid"],
            "attempt": int(v.get("attempt", 0)),
            "outcome": "victim",
            "reason": v.get("reason"),
            "quota": v.get("quota"),
            "preemptor": data["preemptor"],
            "victims": [],
        }
        for v in victims
    ]
    return rows
