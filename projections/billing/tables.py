"""The billing read model's tables (SQLAlchemy Core), mirroring migration ``0004_billing``.

Kept apart from the projection code so the rater, the reports and the CLI can
build queries from typed columns without importing the fold logic. Declared on the
schema's one ``MetaData`` (:mod:`ledger.store.schema`), indexes included; the
migration writes the DDL (and the BI views, which only it knows); see ``docs/finance.md``.

``amount_minor`` columns of the ledger tables are ``numeric``: minor units at
sub-minor precision (migration ``0012``); invoice totals and line
amounts stay whole minor units.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Index,
    Integer,
    Numeric,
    Table,
    Text,
    Uuid,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

from ledger.store.schema import metadata

__all__ = [
    "billing_cost_monthly",
    "billing_credit_applications",
    "billing_credit_notes",
    "billing_credit_returns",
    "billing_invoice_lines",
    "billing_invoices",
    "billing_line_totals",
    "billing_occupancies",
    "billing_payments",
    "billing_postings",
    "billing_prices",
    "billing_quota_groups",
    "billing_transactions",
    "billing_usage_lines",
    "billing_workloads",
    "billing_workspace_quotas",
]

_TS = DateTime(timezone=True)

#: Occupancy facts as billing sees them, with when each half was recorded (for --as-of).
billing_occupancies = Table(
    "billing_occupancies",
    metadata,
    Column("occupancy_id", Text, primary_key=True),
    Column("job_uid", Text, nullable=False),
    Column("workspace", Text),
    Column("quota", Text),
    Column("user_name", Text),
    Column("flavor", Text),
    Column("mgpu", BigInteger),
    Column("cpu_milli", BigInteger),
    Column("memory_mib", BigInteger),
    Column("billing_mode", Text),
    Column("started_at", _TS),
    Column("ended_at", _TS),
    Column("end_reason", Text),
    Column("start_event_id", Uuid),
    Column("end_event_id", Uuid),
    Column("start_position", BigInteger),
    Column("end_position", BigInteger),
    Column("start_recorded_at", _TS),
    Column("end_recorded_at", _TS),
    Column("rated_to", _TS),  # latest as_of of a rating transaction for this occupancy
    # no index on end_position: the rater's pending query filters on GREATEST(start, end)
    Index("billing_occupancies_open", "started_at", postgresql_where=text("ended_at IS NULL")),
    Index("billing_occupancies_window", "started_at", "ended_at"),
    # one job's cost (``job_cost``) and the cluster clock's max(ended_at): migration 0017
    Index("billing_occupancies_job", "job_uid"),
    Index("billing_occupancies_ended", "ended_at"),
)

#: Price events in publication order (the rater and the cost report build schedules from them).
billing_prices = Table(
    "billing_prices",
    metadata,
    Column("position", BigInteger, primary_key=True),
    Column("event_id", Uuid, nullable=False),
    Column("type", Text, nullable=False),
    Column("key", Text, nullable=False),  # book id or spot resource
    Column("effective_from", _TS, nullable=False),
    Column("recorded_at", _TS, nullable=False),
    Column("data", JSONB, nullable=False),
)

#: One row per LedgerTransactionPosted; usage attributes flattened for reports.
billing_transactions = Table(
    "billing_transactions",
    metadata,
    Column("transaction_id", Text, primary_key=True),
    Column("event_id", Uuid, nullable=False),
    Column("position", BigInteger, nullable=False),
    Column("occurred_at", _TS, nullable=False),
    Column("recorded_at", _TS, nullable=False),
    Column("period", Text),
    Column("memo", Text, nullable=False),
    Column("reverses", Text),
    Column("cause_event_ids", JSONB, nullable=False),
    Column("currency", Text),
    Column("amount_minor", Numeric, nullable=False),  # receivable side (what is owed)
    Column("workspace", Text),
    Column("occupancy_id", Text),
    Column("job_uid", Text),
    Column("quota", Text),
    Column("user_name", Text),
    Column("flavor", Text),
    Column("resource", Text),
    Column("billing_mode", Text),
    Column("usage_period", Text),
    Column("unit", Text),
    Column("usage", Numeric),
    Column("as_of", _TS),
    Column("data", JSONB, nullable=False),
    Index("billing_transactions_period", "period", "workspace"),
    Index("billing_transactions_job", "job_uid"),
    Index("billing_transactions_usage_period", "usage_period", "recorded_at"),
    # late adjustments (a usage period locked: ledger.periods), moved by the cost report
    Index(
        "billing_transactions_late",
        "period",
        postgresql_where=text("usage_period IS NOT NULL AND period <> usage_period"),
    ),
)

billing_postings = Table(
    "billing_postings",
    metadata,
    Column("transaction_id", Text, primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("account", Text, nullable=False),
    Column("amount_minor", Numeric, nullable=False),
    Column("currency", Text, nullable=False),
    Index("billing_postings_account", "account"),
)

#: What has been posted per rated line key and rate part: the rater's ``posted`` for ``accrue``.
billing_line_totals = Table(
    "billing_line_totals",
    metadata,
    Column("occupancy_id", Text, primary_key=True),
    Column("usage_period", Text, primary_key=True),
    Column("resource", Text, primary_key=True),
    Column("billing_mode", Text, primary_key=True),
    Column("usage", Numeric, nullable=False),
    Column("amount_minor", Numeric, nullable=False),
    # ledger.rating.rate_key; '' before parts
    Column("rate", Text, primary_key=True, server_default=text("''")),
)

#: Rated usage per job x usage period x resource x billing mode.
billing_usage_lines = Table(
    "billing_usage_lines",
    metadata,
    Column("job_uid", Text, primary_key=True),
    Column("usage_period", Text, primary_key=True),
    Column("resource", Text, primary_key=True),
    Column("billing_mode", Text, primary_key=True),
    Column("currency", Text, primary_key=True),
    Column("workspace", Text, nullable=False),
    Column("quota", Text, nullable=False),
    Column("user_name", Text, nullable=False),
    Column("flavor", Text, nullable=False),
    Column("unit", Text, nullable=False),
    Column("usage", Numeric, nullable=False),
    Column("amount_minor", Numeric, nullable=False),
    Index("billing_usage_lines_period", "usage_period", "workspace"),
)

#: Pre-aggregated cost per month x workspace x quota x user x flavor x mode (the fast report).
billing_cost_monthly = Table(
    "billing_cost_monthly",
    metadata,
    Column("usage_period", Text, primary_key=True),
    Column("workspace", Text, primary_key=True),
    Column("quota", Text, primary_key=True),  # '' when the job has none
    Column("user_name", Text, primary_key=True),
    Column("flavor", Text, primary_key=True),
    Column("billing_mode", Text, primary_key=True),
    Column("currency", Text, primary_key=True),
    Column("amount_minor", Numeric, nullable=False),
)

billing_invoices = Table(
    "billing_invoices",
    metadata,
    Column("invoice_id", Text, primary_key=True),
    Column("workspace", Text, nullable=False),
    Column("period", Text, nullable=False),
    Column("currency", Text, nullable=False),
    Column("total_minor", BigInteger, nullable=False),
    Column("line_count", Integer, nullable=False),
    Column("issued_at", _TS, nullable=False),
    Column("status", Text, nullable=False),  # issued | voided
    Column("void_reason", Text),
    Column("credited_minor", BigInteger, nullable=False, server_default=text("0")),
    Column("position", BigInteger, nullable=False),
    Column("recorded_at", _TS, nullable=False),
    # migration 0027: what its payments settled, the credit applied to it, and when
    # InvoiceOverdue said it was overdue (docs/finance.md, "Payments and receivables")
    Column("paid_minor", BigInteger, nullable=False, server_default=text("0")),
    Column("applied_minor", BigInteger, nullable=False, server_default=text("0")),
    Column("overdue_at", _TS),
    # migration 0029: what InvoiceOverSettled returned from it to the credit balance
    Column("returned_minor", BigInteger, nullable=False, server_default=text("0")),
    Index("billing_invoices_workspace_period", "workspace", "period"),
)

billing_invoice_lines = Table(
    "billing_invoice_lines",
    metadata,
    Column("invoice_id", Text, primary_key=True),
    Column("line_no", Integer, primary_key=True),
    Column("description", Text, nullable=False),
    Column("workspace", Text, nullable=False),
    Column("job_uid", Text),
    Column("resource", Text, nullable=False),
    Column("billing_mode", Text, nullable=False),
    Column("quantity", Numeric, nullable=False),
    Column("unit", Text, nullable=False),
    Column("amount_minor", BigInteger, nullable=False),
    Column("transaction_ids", JSONB, nullable=False),
    Column("rate", Numeric),  # per unit-hour; NULL on lines of invoices issued per job
    Column("amount_precise", Numeric),  # the line's precise sum, before its one rounding
)

billing_credit_notes = Table(
    "billing_credit_notes",
    metadata,
    Column("credit_note_id", Text, primary_key=True),
    Column("invoice_id", Text, nullable=False),
    Column("amount_minor", BigInteger, nullable=False),
    Column("currency", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("position", BigInteger, nullable=False),
    Column("recorded_at", _TS, nullable=False),
    Index("billing_credit_notes_invoice", "invoice_id"),
)

#: Payments received against invoices (PaymentRecorded, migration 0027): the applied part
#: settled the invoice, the excess went to the workspace's credit balance.
billing_payments = Table(
    "billing_payments",
    metadata,
    Column("payment_id", Text, primary_key=True),
    Column("invoice_id", Text, nullable=False),
    Column("workspace", Text, nullable=False),
    Column("amount_minor", BigInteger, nullable=False),
    Column("applied_minor", BigInteger, nullable=False),
    Column("excess_minor", BigInteger, nullable=False),
    Column("currency", Text, nullable=False),
    Column("reference", Text, nullable=False),
    Column("received_at", _TS, nullable=False),
    Column("source", Text, nullable=False),
    Column("position", BigInteger, nullable=False),
    Column("recorded_at", _TS, nullable=False),
    Index("billing_payments_invoice", "invoice_id"),
    Index("billing_payments_workspace", "workspace", "position"),
)

#: Credit balances applied to later invoices (CreditApplied, migration 0027).
billing_credit_applications = Table(
    "billing_credit_applications",
    metadata,
    Column("application_id", Text, primary_key=True),
    Column("invoice_id", Text, nullable=False),
    Column("from_invoice_id", Text, nullable=False),
    Column("payment_id", Text, nullable=False),
    Column("workspace", Text, nullable=False),
    Column("amount_minor", BigInteger, nullable=False),
    Column("currency", Text, nullable=False),
    Column("occurred_at", _TS, nullable=False),
    Column("position", BigInteger, nullable=False),
    Index("billing_credit_applications_invoice", "invoice_id"),
    Index("billing_credit_applications_payment", "payment_id"),
)

#: Over-settled invoices' excess returned to the credit balance (InvoiceOverSettled,
#: migration 0029): a credit source like an overpayment's excess.
billing_credit_returns = Table(
    "billing_credit_returns",
    metadata,
    Column("settlement_id", Text, primary_key=True),
    Column("invoice_id", Text, nullable=False),
    Column("workspace", Text, nullable=False),
    Column("amount_minor", BigInteger, nullable=False),
    Column("currency", Text, nullable=False),
    Column("occurred_at", _TS, nullable=False),
    Column("position", BigInteger, nullable=False),
    Index("billing_credit_returns_invoice", "invoice_id"),
)

#: Workspace -> quota bindings (WorkspaceBound) as of the events folded so far.
billing_workspace_quotas = Table(
    "billing_workspace_quotas",
    metadata,
    Column("workspace", Text, primary_key=True),
    Column("quota", Text),
    Column("position", BigInteger, nullable=False),
)

#: quota -> (parent, resource groups it names) as of the events folded so far: an
#: occupancy of a quota that draws on subscribed groups (its own or an ancestor's) is
#: rated in billing mode ``quota`` (prepaid) rather than pay-as-you-go (docs/subscriptions.md)
billing_quota_groups = Table(
    "billing_quota_groups",
    metadata,
    Column("quota", Text, primary_key=True),
    Column("parent", Text),
    Column("resource_groups", JSONB, nullable=False),
    Column("position", BigInteger, nullable=False),
    #: the quota's spec as applied: its ``min`` is the capacity a spilling service's
    #: replicas are counted against (migration 0024; NULL in rows folded before it)
    Column("spec", JSONB),
)

#: Services and notebooks as billing sees them (migration 0024): whose rates apply to a
#: replica's occupancy (its job_uid is the workload's uid), what ``--group-by kind|service``
#: reports, and whether a replica beyond its quota's capacity spills onto public resources.
billing_workloads = Table(
    "billing_workloads",
    metadata,
    Column("job_uid", Text, primary_key=True),
    Column("workload", Text, nullable=False),  # service | notebook
    Column("kind", Text, nullable=False),  # Deployment, StatefulSet, LeaderWorkerSet
    Column("namespace", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("spillover", Text, nullable=False),  # none | public
    Column("position", BigInteger, nullable=False),
)
