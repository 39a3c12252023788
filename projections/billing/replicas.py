"""How each replica of a service was billed: its interval and the billing mode billing
decided at its start (prepaid ``quota`` within its quota's capacity, ``public`` for a
spilling service's replica beyond it; docs/workloads.md)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, text

__all__ = ["replica_billing"]


def replica_billing(conn: Connection, job_uid: str) -> list[dict[str, Any]]:
    """The job's occupancies in start order: id, start, end (None: still running), the
    GPU flavor and mGPU held, and the billing mode each is rated in."""
    rows = conn.execute(
        text(
            "SELECT occupancy_id, started_at, ended_at, flavor, mgpu, billing_mode "
            "FROM billing_occupancies WHERE job_uid = :u AND started_at IS NOT NULL "
            "ORDER BY started_at, occupancy_id"
        ),
        {"u": job_uid},
    ).mappings()
    return [dict(row) for row in rows]
