"""The names a report filter may mention: workspaces, users, quotas, flavors, periods.

A filter naming something the read models have never seen (a typo, ``ws-nope``) is
an error that lists what is known, not an empty table; an empty result for a known
name is an honest "no rows". The commands ask only when a filtered read came back
empty, or up front where the names are few (quotas, flavors).
"""

from __future__ import annotations

from sqlalchemy import Connection, text

__all__ = [
    "billing_workspaces",
    "invoice_periods",
    "job_users",
    "job_workspaces",
    "quota_flavors",
    "quota_names",
]


def _names(conn: Connection, sql: str) -> set[str]:
    return {value for (value,) in conn.execute(text(sql)) if value is not None}


def job_workspaces(conn: Connection) -> set[str]:
    """Workspaces with a job, or bound to a quota (the jobs projection's view)."""
    return _names(
        conn,
        "SELECT workspace FROM job_state UNION SELECT workspace FROM job_workspace_quotas",
    )


def job_users(conn: Connection) -> set[str]:
    """Users (``dlc.ledger/user``) with a job."""
    return _names(conn, 'SELECT DISTINCT "user" FROM job_state')


def quota_names(conn: Connection) -> set[str]:
    """Every quota the tree ever held, and ``-`` (usage without one) once it has usage."""
    return _names(
        conn, "SELECT quota_id FROM quota_tree_history UNION SELECT quota FROM quota_own_usage"
    )


def quota_flavors(conn: Connection) -> set[str]:
    """Every flavor with quota usage, or named by a quota's min or max."""
    return _names(
        conn,
        "SELECT flavor FROM quota_own_usage UNION "
        "SELECT jsonb_object_keys(spec->'min') FROM quota_tree_history WHERE spec IS NOT NULL "
        "UNION "
        "SELECT jsonb_object_keys(spec->'max') FROM quota_tree_history WHERE spec IS NOT NULL",
    )


def invoice_periods(conn: Connection) -> set[str]:
    """Periods (``YYYY-MM``) with at least one invoice, issued or voided."""
    return _names(conn, "SELECT DISTINCT period FROM billing_invoices")


def billing_workspaces(conn: Connection) -> set[str]:
    """Workspaces billing knows: with usage, an invoice, or a quota binding."""
    return _names(
        conn,
        "SELECT workspace FROM billing_invoices UNION "
        "SELECT workspace FROM billing_occupancies UNION "
        "SELECT workspace FROM billing_workspace_quotas",
    )
