"""The maximum run times jobs declared, read from their ``JobSubmitted`` facts.

A job may declare its timeout (annotation ``dlc.ledger/max-run-seconds``, carried by its
``JobSubmitted`` as ``max_run_seconds``): the start estimates cap its run time there and
the live dispatcher stops it there (``MaxRunTimeExceeded``). Few jobs declare one and the
dispatcher asks only about the jobs it holds, so they are read from the stored facts by
stream (``job/<uid>``, indexed) through the store's named view, not kept in a read model.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import ARRAY, Connection, Text, bindparam, text

from ledger.store.views import typed_events

__all__ = ["max_run_times"]

_SQL = f"""
SELECT DISTINCT ON (e.stream) substr(e.stream, 5) AS job_uid,
       (e.data->>'max_run_seconds')::bigint AS seconds
  FROM {typed_events("JobSubmitted")} e
 WHERE e.stream = ANY(:streams) AND e.data->>'max_run_seconds' IS NOT NULL
 ORDER BY e.stream, e.position DESC
"""


def max_run_times(conn: Connection, jobs: Collection[str]) -> dict[str, int]:
    """The declared maximum run time (seconds) of each of ``jobs`` that declared one."""
    if not jobs:
        return {}
    streams = bindparam("streams", sorted(f"job/{uid}" for uid in jobs), type_=ARRAY(Text))
    rows = conn.execute(text(_SQL).bindparams(streams))
    return {str(uid): int(seconds) for uid, seconds in rows if seconds is not None}
