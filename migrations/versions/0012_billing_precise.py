"""Billing branch: ledger amounts below the minor unit, line totals per rate, invoice lines
per resource x billing mode x rate with their precise sum.

Revision ID: 0012
Revises: 0004
Create Date: 2026-12-05

Rated amounts, accruals and postings are carried at 10**-9 of a minor unit
(``ledger.money.PRECISE_DIGITS``); money is rounded once, half-even, per invoice
line. So the ``amount_minor`` columns of the ledger tables become ``numeric``
(minor units at sub-minor precision; whole values stored before stay what they
were), ``billing_line_totals`` is keyed by rate part too, and invoice lines keep
their rate and precise amount. The BI views are recreated on top, with
``cost_minor`` rounded half-even (``finance_round_half_even``) beside the precise
``cost_minor_precise``. Read models only: nothing is lost either way.
"""

from alembic import op

revision = "0012"
down_revision = "0004"
branch_labels = None
depends_on = None

APP_ROLE = "dlc_ledger_app"
VIEWS = (
    "finance_cost_by_workspace_month_flavor",
    "finance_job_cost",
    "finance_invoice_lines",
)
_AMOUNTS = (
    "billing_transactions",
    "billing_postings",
    "billing_line_totals",
    "billing_usage_lines",
    "billing_cost_monthly",
)

_VIEWS_PRECISE = """
CREATE FUNCTION finance_round_half_even(x numeric) RETURNS numeric
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  AS $$ SELECT CASE WHEN x - trunc(x) IN (0.5, -0.5) THEN 2 * round(x / 2) ELSE round(x) END $$;

CREATE VIEW finance_cost_by_workspace_month_flavor AS
  SELECT usage_period AS month, workspace, flavor, currency,
         finance_round_half_even(sum(amount_minor))::bigint AS cost_minor,
         sum(amount_minor) AS cost_minor_precise
    FROM billing_cost_monthly
   GROUP BY usage_period, workspace, flavor, currency;

CREATE VIEW finance_job_cost AS
  SELECT job_uid, workspace, quota, user_name, currency,
         min(usage_period) AS first_month, max(usage_period) AS last_month,
         finance_round_half_even(sum(amount_minor))::bigint AS cost_minor,
         sum(amount_minor) AS cost_minor_precise
    FROM billing_usage_lines
   GROUP BY job_uid, workspace, quota, user_name, currency;

CREATE VIEW finance_invoice_lines AS
  SELECT i.invoice_id, i.workspace, i.period, i.status, i.currency, i.issued_at,
         l.line_no, l.job_uid, l.resource, l.billing_mode, l.quantity, l.unit,
         l.amount_minor, l.description, l.rate, l.amount_precise
    FROM billing_invoices i JOIN billing_invoice_lines l USING (invoice_id);
"""

_VIEWS_WHOLE = """
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


def _drop_views() -> None:
    for view in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {view}")


def _grant_views() -> None:
    op.execute(f"GRANT SELECT ON {', '.join(VIEWS)} TO {APP_ROLE}")


def upgrade() -> None:
    _drop_views()
    for table in _AMOUNTS:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN amount_minor TYPE numeric")
    op.execute("ALTER TABLE billing_line_totals ADD COLUMN rate text NOT NULL DEFAULT ''")
    op.execute("ALTER TABLE billing_line_totals DROP CONSTRAINT billing_line_totals_pkey")
    op.execute(
        "ALTER TABLE billing_line_totals ADD PRIMARY KEY "
        "(occupancy_id, usage_period, resource, billing_mode, rate)"
    )
    op.execute("ALTER TABLE billing_invoice_lines ADD COLUMN rate numeric")
    op.execute("ALTER TABLE billing_invoice_lines ADD COLUMN amount_precise numeric")
    op.execute(_VIEWS_PRECISE)
    _grant_views()


def downgrade() -> None:
    _drop_views()
    op.execute("DROP FUNCTION IF EXISTS finance_round_half_even(numeric)")
    op.execute("ALTER TABLE billing_invoice_lines DROP COLUMN amount_precise")
    op.execute("ALTER TABLE billing_invoice_lines DROP COLUMN rate")
    # parts of a line fold back into one row per line key
    op.execute(
        "CREATE TEMP TABLE _line_totals ON COMMIT DROP AS "
        "SELECT occupancy_id, usage_period, resource, billing_mode, sum(usage) AS usage, "
        "sum(amount_minor) AS amount_minor FROM billing_line_totals "
        "GROUP BY occupancy_id, usage_period, resource, billing_mode"
    )
    op.execute("DELETE FROM billing_line_totals")
    op.execute("ALTER TABLE billing_line_totals DROP CONSTRAINT billing_line_totals_pkey")
    op.execute("ALTER TABLE billing_line_totals DROP COLUMN rate")
    op.execute(
        "ALTER TABLE billing_line_totals ADD PRIMARY KEY "
        "(occupancy_id, usage_period, resource, billing_mode)"
    )
    op.execute(
        "INSERT INTO billing_line_totals (occupancy_id, usage_period, resource, billing_mode, "
        "usage, amount_minor) SELECT * FROM _line_totals"
    )
    for table in _AMOUNTS:
        op.execute(
            f"ALTER TABLE {table} ALTER COLUMN amount_minor TYPE bigint USING round(amount_minor)"
        )
    op.execute(_VIEWS_WHOLE)
    _grant_views()
