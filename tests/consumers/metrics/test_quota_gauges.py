"""The dispatcher's quota gauges are the reports' figures (``ledger.quotas.usage``, what
``quotas tree`` shows): lending within ``lend_limit``, idle-mode jobs always borrowing,
``lent`` what a quota lends outside its subtree."""

from __future__ import annotations

from datetime import UTC, datetime

from prometheus_client import REGISTRY

from consumers.dispatcher.metrics import record_cycle
from ledger.dispatch import Admitted, QuotaNode
from ledger.dispatch.cycle import CycleInput, CycleResult

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
