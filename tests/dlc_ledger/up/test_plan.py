"""Which parts ``up`` runs for which options (:class:`~dlc_ledger.wiring.up.UpPlan`)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from dlc_ledger.wiring.up import Running, UpPlan

KUBECONFIG = Path("kubeconfig.yaml")


@pytest.mark.parametrize(
    ("plan", "kubesim", "dispatcher"),
    [
        (UpPlan(), True, True),  # kubesim: the dispatcher exports the quota gauges
        (UpPlan(dispatch=False), True, False),
        (UpPlan(kubeconfig=KUBECONFIG), False, False),  # a real cluster: only when asked
        (UpPlan(kubeconfig=KUBECONFIG, dispatch=True), False, True),
        (UpPlan(replay=False), False, False),  # no cluster to act on
        (UpPlan(replay=False, dispatch=True), False, False),
    ],
)
def test_kubesim_and_the_dispatcher_run_when_coherent(
    plan: UpPlan, kubesim: bool, dispatcher: bool
) -> None:
    assert plan.on_kubesim is kubesim
    assert plan.runs_dispatcher is dispatcher


def test_the_banner_names_every_url_and_the_token() -> None:
    lines = Running(
        base_url="http://127.0.0.1:8123",
        token="dlct_secret",
        token_id="tok_1",
        components=["projector", "api"],
        kubesim_url="http://127.0.0.1:9000 (replaying openb, 10 pods, 3600x)",
        notes=["a note"],
        token_expires=datetime(2026, 12, 7, 9, 0, tzinfo=UTC),
    ).lines()
    text = "\n".join(lines)
    for expected in (
        "running projector, api (Ctrl-C stops them)",
        "dashboard: http://127.0.0.1:8123/",
        "api:       http://127.0.0.1:8123/v1",
        "metrics:   http://127.0.0.1:8123/metrics",
        "kubesim:   http://127.0.0.1:9000 (replaying openb, 10 pods, 3600x)",
        "token:     dlct_secret",
        "(admin, up-admin tok_1; expires 2026-12-07T09:00:00Z, revoked when up stops)",
        "metrics:   http://127.0.0.1:8123/metrics (every component's; an admin or metrics token)",
        'curl -H "Authorization: Bearer dlct_secret" http://127.0.0.1:8123/v1/whoami',
        "note: a note",
    ):
        assert expected in text
