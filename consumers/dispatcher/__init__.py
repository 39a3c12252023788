"""The live dispatcher: decisions from projected state, stored as events, then acted on
the cluster; one active instance through a lease (``docs/dispatch.md``, "The live loop").

- :mod:`~consumers.dispatcher.loop`: :class:`Dispatcher` (one cycle) and the budgets seam;
- :mod:`~consumers.dispatcher.decisions`: the decision events and their ids;
- :mod:`~consumers.dispatcher.actuator`: the port it acts through;
- :mod:`~consumers.dispatcher.kube_actuator`: that port on Kubernetes;
- :mod:`~consumers.dispatcher.runner`: the process loop under the lease.
"""

from consumers.dispatcher.actuator import ActuationError, Actuator, JobRef
from consumers.dispatcher.loop import BudgetGate, CycleOutcome, Dispatcher
from consumers.dispatcher.runner import LEASE_NAME, LeaseBusy, run_dispatcher

__all__ = [
    "LEASE_NAME",
    "ActuationError",
    "Actuator",
    "BudgetGate",
    "CycleOutcome",
    "Dispatcher",
    "JobRef",
    "LeaseBusy",
    "run_dispatcher",
]
