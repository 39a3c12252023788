"""The dispatcher's quota gauges are the reports' figures (``ledger.quotas.usage``, what
``quotas tree`` shows): lending within ``lend_limit``, idle-mode jobs always borrowing,
``lent`` what a quota lends outside its subtree."""

from __future__ import annotations

from datetime import UTC, datetime

from prometheus_client import REGISTRY

from consumers.dispatcher.metrics import record_cycle
from ledger.dispatch import Admitted, Decision, Incoming, QuotaNode
from ledger.dispatch.cycle import CycleInput, CycleResult, PendingStatus

_T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _gauge(name: str, quota: str) -> float | None:
    return REGISTRY.get_sample_value(name, {"quota": quota, "resource": "gpu/any"})


def test_the_gauges_lend_within_lend_limits_like_the_reports() -> None:
    """The demo's shape in GPUs: ``ls`` runs 40 on a min of 32; ``online``'s pool gives 4,
    ``guaranteed`` 2 (its lend limit, not 4), ``online`` borrows 2 from ``openb``."""
    quotas = (
        QuotaNode("openb", None, {"gpu/any": 80000}),
        QuotaNode("online", "openb", {"gpu/any": 40000}),
        QuotaNode("ls", "online", {"gpu/any": 32000}),
        QuotaNode("guaranteed", "online", {"gpu/any": 4000}, lend_limit={"gpu/any": 2000}),
        QuotaNode("offline", "openb", {"gpu/any": 20000}),
        QuotaNode("be", "offline", {"gpu/any": 0}, {"gpu/any": 40000}),
    )
    admitted = (
        Admitted("j1", "ls", 0, {"gpu/any": 40000}, _T0),
        Admitted("j2", "be", 0, {"gpu/any": 3000}, _T0, billing_mode="idle"),
    )
    record_cycle(CycleInput(quotas, admitted, (), _T0), CycleResult(), 0.001)
    borrowed = {q.name: _gauge("dlc_quota_borrowed_resources", q.name) for q in quotas}
    lent = {q.name: _gauge("dlc_quota_lent_resources", q.name) for q in quotas}
    assert borrowed == {"openb": 0, "online": 2000, "ls": 8000, "guaranteed": 0,
                        "offline": 0, "be": 3000}  # fmt: skip
    assert lent == {"openb": 0, "online": 0, "ls": 0, "guaranteed": 2000,
                    "offline": 0, "be": 0}  # fmt: skip
    assert _gauge("dlc_quota_resource_usage", "openb") == 43000
    assert _gauge("dlc_quota_nominal_quota", "guaranteed") == 4000
    assert _gauge("dlc_quota_max_quota", "be") == 40000


def test_services_and_notebooks_count_as_jobs_do_and_a_spilled_replica_in_none() -> None:
    """The integrated example in small: inference on the parent quota (its own workloads on
    its own leaf in the core), training and a notebook below; a waiting replica pending in
    the parent's queue; a replica admitted on public resources in no quota's usage."""
    quotas = (
        QuotaNode("quota1", None, {"gpu/any": 16000}),
        QuotaNode("quota1.1", "quota1", {"gpu/any": 8000}),
        QuotaNode("quota1.2", "quota1", {"gpu/any": 4000}),
    )
    admitted = (
        Admitted("svc#0", "quota1", 100, {"gpu/any": 4000}, _T0, workload="service"),
        Admitted("svc#1", "quota1", 100, {"gpu/any": 4000}, _T0, workload="service"),
        Admitted("t1", "quota1.1", 0, {"gpu/any": 6000}, _T0),
        Admitted("nb#0", "quota1.2", 50, {"gpu/any": 2000}, _T0, workload="notebook"),
    )
    waiting = Incoming("svc#2", "quota1", 100, {"gpu/any": 4000}, _T0, workload="service")
    result = CycleResult(
        admissions=(Decision("svc#3", "admit", spillover=True),),
        pending=(PendingStatus("svc#2", "quota1", "WaitingForQuota", 1, 1),),
    )
    spilled_before = REGISTRY.get_sample_value(
        "dlc_dispatch_decisions_total", {"outcome": "spilled"}
    )
    record_cycle(CycleInput(quotas, admitted, (waiting,), _T0), result, 0.001)
    assert _gauge("dlc_quota_resource_usage", "quota1") == 16000
    # the parent's own pool is 4: its services borrow 4 of the children's guarantees
    assert _gauge("dlc_quota_borrowed_resources", "quota1") == 0
    assert _gauge("dlc_quota_resource_usage", "quota1.1") == 6000
    assert _gauge("dlc_quota_resource_usage", "quota1.2") == 2000
    assert _gauge("dlc_quota_resource_usage", "quota1/own") is None  # not exported
    assert REGISTRY.get_sample_value("dlc_pending_workloads", {"quota": "quota1"}) == 1
    after = REGISTRY.get_sample_value("dlc_dispatch_decisions_total", {"outcome": "spilled"})
    assert after == (spilled_before or 0) + 1
