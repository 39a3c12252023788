"""The read layer's presenters: rows shaped for the CLI and the API from the read models,
reading only (no append, no catch-up). Budgets as rows (:mod:`.budgets`), month to
date (:mod:`.months`), the costliest jobs (:mod:`.cost_top`), a job's GPU and cost
figures (:mod:`.job_figures`), a quota's figures (:mod:`.quota_rows`), the store's span
of cluster time (:mod:`.extent`), money for either edge (:mod:`.money`), the journal export's
CSV and JSON (:mod:`.journal`) and a CSV cell
made safe (:mod:`.csv_cells`). The CLI and the API call them and the use cases
(:mod:`dlc_ledger.services`); nothing below them imports them."""

from dlc_ledger.presenters.budgets import budget_rows
from dlc_ledger.presenters.cost_top import top_cost
from dlc_ledger.presenters.csv_cells import neutralized
from dlc_ledger.presenters.extent import Extent, data_extent
from dlc_ledger.presenters.job_figures import gpu_hours, gpu_model, gpu_request_mgpu, listed_jobs
from dlc_ledger.presenters.journal import journal_csv, journal_document
from dlc_ledger.presenters.money import money_fields, with_amounts
from dlc_ledger.presenters.months import forecast_precise, month_to_date
from dlc_ledger.presenters.quota_rows import (
    node_row,
    series_row,
    usage_json,
    usage_table,
    with_kinds,
)

__all__ = [
    "Extent",
    "budget_rows",
    "data_extent",
    "forecast_precise",
    "gpu_hours",
    "gpu_model",
    "gpu_request_mgpu",
    "journal_csv",
    "journal_document",
    "listed_jobs",
    "money_fields",
    "month_to_date",
    "neutralized",
    "node_row",
    "series_row",
    "top_cost",
    "usage_json",
    "usage_table",
    "with_amounts",
    "with_kinds",
]
