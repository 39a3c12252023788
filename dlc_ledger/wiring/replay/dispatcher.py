"""The closed-loop replay's dispatcher: the live one (``consumers/dispatcher``), acting on
kubesim through the official Kubernetes client and deciding at the replay's virtual time."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from kubernetes import client

from dlc_ledger.wiring.replay.closed_loop import CycleRunner
from ledger.store.postgres import PostgresEventStore

__all__ = ["default_dispatcher"]


def default_dispatcher(
    store: PostgresEventStore, api: client.ApiClient, clock: Callable[[], datetime]
) -> CycleRunner:
    """The live dispatcher on ``store``, acting through ``api``, on ``clock``, with the
    budgets' gate as ``dlc-ledger dispatch`` has it; the loop brings the read models up to
    date itself before each cycle (no ``refresh``)."""
    from consumers.dispatcher.kube_actuator import KubeActuator
    from consumers.dispatcher.loop import Dispatcher
    from processes.budgets import StoreBudgetGate

    return Dispatcher(store, KubeActuator(api), clock, budgets=StoreBudgetGate(store))
