"""The dispatch context's use cases: a decision scenario file simulated (:mod:`.scenarios`)
and why a job waits, a quota's queue and the start estimates (:mod:`.why`). The decisions
are :mod:`ledger.dispatch`, the view :mod:`projections.dispatch`, the live dispatcher
:mod:`consumers.dispatcher`."""

from dlc_ledger.services.dispatch.scenarios import simulate_file
from dlc_ledger.services.dispatch.why import estimates_report, queue_page, why_job

__all__ = [
    "estimates_report",
    "queue_page",
    "simulate_file",
    "why_job",
]
