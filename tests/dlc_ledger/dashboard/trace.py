"""The browser test's data: a small closed-loop replay of openb with the closed-loop quota
tree, the demo price book and the demo's subscriptions, plus one job too big for the tree,
left pending, two budgets, a voided invoice and a credit note.

The slice (the first ``SLICE`` openb rows that are not best-effort, as in
tests/e2e/closed_loop) queues jobs and preempts a borrower, so every view has figures; the
pending job gives the job page a queue position and a reason; the budgets, the void and
the credit give the finance views a state of each kind.
"""

from __future__ import annotations

import csv
import io
from importlib.resources import as_file, files
from pathlib import Path

from consumers.projector import Projector
from dlc_ledger.services.billing import issue_credit_note, record_payment, tick, void_invoice
from dlc_ledger.services.budgets import apply_budget_file
from dlc_ledger.services.clocks import observed_cluster_time
from dlc_ledger.wiring.replay import ReplaySummary, run_replay
from kubesim.clock import DEFAULT_EPOCH
from kubesim.traces import OPENB_PODS_CSV
from ledger.events import JobQueued, JobSubmitted, ReplicaSpec
from ledger.store.postgres import PostgresEventStore
from processes.billing import mark_overdue
from projections.billing.invoice_pages import invoice_page
from projections.dispatch.estimates import projected_now
from projections.registry import all_projections
from tests.support.builders import Narrator

__all__ = ["BUDGETS", "CREDITED", "PENDING_JOB", "SLICE", "replay_slice"]

SLICE = 100
#: a job asking for more GPUs than the whole tree guarantees: it can only wait
PENDING_JOB = "dash-pending-0001"
#: one budget a month crossed by what the slice spends, one that never is
BUDGETS = """
budgets:
  - {workspace: ws-ls, amount: "2000.00", currency: USD, period: month, action: notify}
  - {workspace: ws-burstable, amount: "100000.00", currency: USD, period: month, action: notify}
"""
#: the credited invoice is this workspace's first; the voided one another workspace's first
CREDITED = "ws-ls"


def _slice(path: Path) -> Path:
    rows = list(csv.DictReader(io.StringIO(OPENB_PODS_CSV.read_text())))
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows([r for r in rows if r["qos"] != "BE"][:SLICE])
    return path


def _submit_pending(store: PostgresEventStore) -> None:
    with store.engine.connect() as conn:
        now = projected_now(conn)
    assert now is not None
    n = Narrator("dashboard")
    n.tell(
        JobSubmitted(
            job_uid=PENDING_JOB,
            name="too-big-for-the-tree",
            namespace="team-ls",
            kind="PyTorchJob",
            framework="pytorch",
            workspace="ws-ls",
            quota="ls",
            user="dana",
            priority=200,
            replicas=(ReplicaSpec(count=4, mgpu=8000, cpu_milli=8000, memory_mib=65536),),
        ),
        f"job/{PENDING_JOB}",
        now,
        source="kube-watcher/dashboard-test",
    )
    n.tell(
        JobQueued(job_uid=PENDING_JOB),
        f"job/{PENDING_JOB}",
        now,
        source="kube-watcher/dashboard-test",
    )
    store.append(n.events)
    Projector(store, all_projections()).catch_up()


def _bill(store: PostgresEventStore) -> None:
    """The billing tick at the trace's end, as ``dlc-ledger demo`` runs it: the ledger's
    cost (the cost views' default source) is posted."""
    end = observed_cluster_time(store)
    assert end is not None
    tick(store, end)
    Projector(store, all_projections()).catch_up()


def _first_invoices(store: PostgresEventStore) -> tuple[str, str]:
    """The first invoice of :data:`CREDITED` and the first of another workspace."""
    with store.reading() as conn:
        rows = invoice_page(conn, limit=1000).rows
    credited = next(r for r in rows if r["workspace"] == CREDITED)
    voided = next(r for r in rows if r["workspace"] != CREDITED)
    return str(credited["invoice_id"]), str(voided["invoice_id"])


def _finance(store: PostgresEventStore) -> None:
    """Budgets in force from the slice's start, a voided invoice, a credit note, a payment
    and the overdue invoices."""
    apply_budget_file(store, BUDGETS, principal="test/dashboard", at=DEFAULT_EPOCH)
    credited, voided = _first_invoices(store)
    void_invoice(store, voided, "dashboard test", principal="test/dashboard")
    issue_credit_note(store, credited, "12.34", "dashboard test", principal="test/dashboard")
    # a partial payment, then every invoice still open past its (zero) due days is overdue
    end = observed_cluster_time(store)
    assert end is not None
    record_payment(store, credited, "1.00", end, "dashboard-wire", principal="test/dashboard")
    mark_overdue(store, end, due_days=0)
    Projector(store, all_projections()).catch_up()


def replay_slice(store: PostgresEventStore, bootstrap: str, work: Path) -> ReplaySummary:
    """Replay the slice closed-loop into ``store`` (through the broker at ``bootstrap``)
    with the demo's subscriptions, bill it, then add the pending job, the budgets, a void
    and a credit note."""
    resources = files("dlc_ledger.resources")
    with (
        as_file(resources / "quotas" / "closed-loop.yaml") as tree,
        as_file(resources / "pricebooks" / "demo-2026.yaml") as book,
        as_file(resources / "subscriptions" / "demo.yaml") as plan,
    ):
        summary = run_replay(
            str(_slice(work / "slice.csv")),
            "openb",
            quotas=tree,
            pricebook=book,
            subscriptions=plan,
            store=store,
            bootstrap=bootstrap,
            data_dir=work,
            closed_loop=True,
            cycle=60,
            progress=None,
            timeout=300,
        )
    _bill(store)
    _submit_pending(store)
    _finance(store)
    return summary
