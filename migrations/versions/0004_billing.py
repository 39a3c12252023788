"""Billing branch: occupancy facts for billing, ledger transactions and postings, rated usage
lines, pre-aggregated monthly cost, invoices and credit notes, and the BI views.

Revision ID: 0004
Revises: 0001
Create Date: 2026-12-03

Read models only (projections/billing/projection.py): dropping them loses nothing; the
projection replays them from the event store. The views are documented in
docs/finance.md.
"""

from alembic import op

revision = "0004"
down_revision = "0001"
branch_labels = ("billing",)
depends_on = None

APP_ROLE = "dlc_ledger_app"
TABLES = (
    "billing_occupancies",
    "billing_prices",
    "billing_transactions",
    "billing_postings",
    "billing_line_totals",
    "billing_usage_lines",
    "billing_cost_monthly",
    "billing_invoices",
    "billing_invoice_lines",
    "billing_credit_notes",
    "billing_workspace_quotas",
)
VIEWS = (
    "finance_cost_by_workspace_month_flavor",
    "finance_job_cost",
    "finance_invoice_lines",
)

DDL = """
-- workspace -> quota bindings as of the events folded so far: an occupancy whose pod named
-- no quota is billed to the quota its workspace was bound to when it started
CREATE TABLE billing_workspace_quotas (
    workspace text PRIMARY KEY,
    quota text,
    position bigint NOT NULL
);

CREATE TABLE billing_occupancies (
    occupancy_id text PRIMARY KEY,
    job_uid text NOT NULL,
    workspace text, quota text, user_name text, flavor text,
    mgpu bigint, cpu_milli bigint, memory_mib bigint, billing_mode text,
    started_at timestamptz, ended_at timestamptz, end_reason text,
    start_event_id uuid, end_event_id uuid,
    start_position bigint, end_position bigint,
    start_recorded_at timestamptz, end_recorded_at timestamptz,
    rated_to timestamptz
);
-- no index on end_position: the rater's pending query filters on GREATEST(start, end)
CREATE INDEX billing_occupancies_open ON billing_occupancies (started_at) WHERE ended_at IS NULL;
CREATE INDEX billing_occupancies_window ON billing_occupancies (started_at, ended_at);

CREATE TABLE billing_prices (
    position bigint PRIMARY KEY,
    event_id uuid NOT NULL,
    type text NOT NULL,
    key text NOT NULL,
    effective_from timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL,
    data jsonb NOT NULL
);

CREATE TABLE billing_transactions (
    transaction_id text PRIMARY KEY,
    event_id uuid NOT NULL,
    position bigint NOT NULL,
    occurred_at timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL,
    period text,
    memo text NOT NULL,
    reverses text,
    cause_event_ids jsonb NOT NULL,
    currency text,
    amount_minor bigint NOT NULL,
    workspace text, occupancy_id text, job_uid text, quota text, user_name text,
    flavor text, resource text, billing_mode text, usage_period text, unit text,
    usage numeric, as_of timestamptz,
    data jsonb NOT NULL
);
CREATE INDEX billing_transactions_period ON billing_transactions (period, workspace);
CREATE INDEX billing_transactions_job ON billing_transactions (job_uid);
CREATE INDEX billing_transactions_usage_period ON billing_transactions (usage_period, recorded_at);

CREATE TABLE billing_postings (
    transaction_id text NOT NULL,
    seq integer NOT NULL,
    account text NOT NULL,
    amount_minor bigint NOT NULL,
    currency text NOT NULL,
    PRIMARY KEY (transaction_id, seq)
);
CREATE INDEX billing_postings_account ON billing_postings (account);

CREATE TABLE billing_line_totals (
    occupancy_id text NOT NULL,
    usage_period text NOT NULL,
    resource text NOT NULL,
    billing_mode text NOT NULL,
    usage numeric NOT NULL,
    amount_minor bigint NOT NULL,
    PRIMARY KEY (occupancy_id, usage_period, resource, billing_mode)
);

CREATE TABLE billing_usage_lines (
    job_uid text NOT NULL,
    usage_period text NOT NULL,
    resource text NOT NULL,
    billing_mode text NOT NULL,
    currency text NOT NULL,
    workspace text NOT NULL, quota text NOT NULL, user_name text NOT NULL,
    flavor text NOT NULL, unit text NOT NULL,
    usage numeric NOT NULL,
    amount_minor bigint NOT NULL,
    PRIMARY KEY (job_uid, usage_period, resource, billing_mode, currency)
);
CREATE INDEX billing_usage_lines_period ON billing_usage_lines (usage_period, workspace);

CREATE TABLE billing_cost_monthly (
    usage_period text NOT NULL,
    workspace text NOT NULL,
    quota text NOT NULL,
    user_name text NOT NULL,
    flavor text NOT NULL,
    billing_mode text NOT NULL,
    currency text NOT NULL,
    amount_minor bigint NOT NULL,
    PRIMARY KEY (usage_period, workspace, quota, user_name, flavor, billing_mode, currency)
);

CREATE TABLE billing_invoices (
    invoice_id text PRIMARY KEY,
    workspace text NOT NULL,
    period text NOT NULL,
    currency text NOT NULL,
    total_minor bigint NOT NULL,
    line_count integer NOT NULL,
    issued_at timestamptz NOT NULL,
    status text NOT NULL,
    void_reason text,
    credited_minor bigint NOT NULL DEFAULT 0,
    position bigint NOT NULL,
    recorded_at timestamptz NOT NULL
);
CREATE INDEX billing_invoices_workspace_period ON billing_invoices (workspace, period);

CREATE TABLE billing_invoice_lines (
    invoice_id text NOT NULL,
    line_no integer NOT NULL,
    description text NOT NULL,
    workspace text NOT NULL,
    job_uid text,
    resource text NOT NULL,
    billing_mode text NOT NULL,
    quantity numeric NOT NULL,
    unit text NOT NULL,
    amount_minor bigint NOT NULL,
    transaction_ids jsonb NOT NULL,
    PRIMARY KEY (invoice_id, line_no)
);

CREATE TABLE billing_credit_notes (
    credit_note_id text PRIMARY KEY,
    invoice_id text NOT NULL,
    amount_minor bigint NOT NULL,
    currency text NOT NULL,
    reason text NOT NULL,
    position bigint NOT NULL,
    recorded_at timestamptz NOT NULL
);
CREATE INDEX billing_credit_notes_invoice ON billing_credit_notes (invoice_id);

-- BI views (docs/finance.md). Money is integer minor units; scale comes from the price book.
CREATE VIEW finance_cost_by_workspace_month_flavor AS
  SELECT usage_period AS month, workspace, flavor, currency,
         sum(amount_minor)::bigint AS cost_minor
    FROM billing_cost_monthly
   GROUP BY usage_period, workspace, flavor, currency;

CREATE VIEW finance_job_cost AS
  SELECT job_uid, workspace, quota, user_name, currency,
         min(usage_period) AS first_month, max(usage_period) AS last_month,
         sum(amount_minor)::bigint AS cost_minor
    FROM billing_usage_lines
   GROUP BY job_uid, workspace, quota, user_name, currency;

CREATE VIEW finance_invoice_lines AS
  SELECT i.invoice_id, i.workspace, i.period, i.status, i.currency, i.issued_at,
         l.line_no, l.job_uid, l.resource, l.billing_mode, l.quantity, l.unit,
         l.amount_minor, l.description
    FROM billing_invoices i JOIN billing_invoice_lines l USING (invoice_id);
"""


def upgrade() -> None:
    op.execute(DDL)
    op.execute(
        f"""
        DO $$ BEGIN
          IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
            CREATE ROLE {APP_ROLE} NOLOGIN;
          END IF;
        END $$;
        GRANT SELECT, INSERT, UPDATE, DELETE ON {", ".join(TABLES)} TO {APP_ROLE};
        GRANT SELECT ON {", ".join(VIEWS)} TO {APP_ROLE};
        """
    )


def downgrade() -> None:
    for view in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {view}")
    for table in reversed(TABLES):
        op.execute(f"DROP TABLE IF EXISTS {table}")
