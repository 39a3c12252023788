"""The queue policies against the platform's semantics (issue 36, part 6), each from plain
data: Balance's window follows the current head, tree-wide positions use the order each
queue keeps (Intelligent's aged priority), queue settings refuse what the quota file
refuses, and a job that can never fit is retried at its queue's head unless its quota
says ``on_unfit_head: Skip``."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from ledger.dispatch import (
    Admitted,
    CycleInput,
    CycleResult,
    Incoming,
    QueuePolicyName,
    QueueSettings,
    QuotaNode,
    plan_cycle,
)
from ledger.dispatch.queues import UnfitHeadPolicy, balance_window
from ledger.errors import Invalid

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TEN = timedelta(minutes=10)


def job(name: str, gpu: float, minute: float = 0, priority: int = 0, quota: str = "a") -> Incoming:
    return Incoming(name, quota, priority, {"gpu": gpu}, T0 + timedelta(minutes=minute))


def running(name: str, gpu: float, quota: str = "a") -> Admitted:
    return Admitted(name, quota, 0, {"gpu": gpu}, T0 - timedelta(hours=1))


def admitted(result: CycleResult) -> list[str]:
    return [d.job for d in result.admissions]


# --- Balance: the window is the current head's ---------------------------------------

# one leaf of 4 GPUs, 2 busy: 2 free
LEAF = (QuotaNode("root"), QuotaNode("a", "root", {"gpu": 4}))
BUSY = (running("busy", 2),)
# H has waited 35 minutes (a window of 4 after 10-minute timeouts) and fits; J2, queued a
# minute ago, does not; J3 would
BALANCE = (job("H", 1, -34), job("J2", 3, 0), job("J3", 1, 0))


def _balance(**kw: object) -> CycleResult:
    settings = QueueSettings("Balance", balance_timeout=TEN)
    given = CycleInput(LEAF, BUSY, BALANCE, T0 + timedelta(minutes=1), queues={"a": settings})
    return plan_cycle(replace(given, **kw))  # type: ignore[arg-type]


def test_balance_sets_its_window_from_the_head_left_after_an_admission() -> None:
    assert balance_window(BALANCE[0], QueueSettings("Balance"), T0 + timedelta(minutes=1)) == 4
    # H admitted in a round: J2 is now the head, waited 1 minute: FIFO, J3 waits behind it
    in_a_round = _balance()
    assert admitted(in_a_round) == ["H"]
    assert [(p.job, p.reason, p.held_by) for p in in_a_round.pending] == [
        ("J2", "WaitingForQuota", None),
        ("J3", "WaitingForQuota", "J2"),
    ]


def test_balance_admits_the_same_whichever_way_its_head_was_admitted() -> None:
    in_a_round = _balance()
    reserved = _balance(reserved=frozenset({"H"}))
    assert admitted(reserved) == admitted(in_a_round) == ["H"]
    assert reserved.pending == in_a_round.pending


def test_balance_still_widens_for_a_head_that_keeps_waiting() -> None:
    # J2 (blocked) has itself waited 15 minutes: a window of 2, so J3 is tried and admitted
    late = tuple(replace(j, created_at=j.created_at - timedelta(minutes=14)) for j in BALANCE)
    result = _balance(pending=late)
    assert admitted(result) == ["H", "J3"]


# --- tree-wide positions in the queues' own order ------------------------------------

TWO = (
    QuotaNode("root", min={"gpu": 4}),
    QuotaNode("a", "root", {"gpu": 0}, {"gpu": 4}),
    QuotaNode("b", "root", {"gpu": 0}, {"gpu": 4}),
)
INTELLIGENT = {"a": QueueSettings("Intelligent", aging_interval=TEN), "b": QueueSettings("FIFO")}


def test_tree_positions_merge_the_queues_by_aged_priority() -> None:
    # a (Intelligent): x, priority 2, waited 50 minutes: aged to 6; y, priority 6.
    # b: z, priority 3. Nothing fits (the tree's 4 GPUs are busy).
    pending = (job("x", 4, -49, 2, "a"), job("y", 4, 0, 6, "a"), job("z", 4, 0, 3, "b"))
    cycle = CycleInput(TWO, (running("busy", 4, "b"),), pending, T0 + timedelta(minutes=1))
    result = plan_cycle(replace(cycle, queues=INTELLIGENT))
    assert admitted(result) == []
    assert [(p.job, p.position, p.cohort_position) for p in result.pending] == [
        ("x", 1, 1),
        ("y", 2, 2),
        ("z", 1, 3),
    ]


def test_heads_compete_across_quotas_in_the_order_the_positions_show() -> None:
    # both heads borrow and only one fits: the aged x (6) goes before z (3), as shown
    pending = (job("x", 4, -49, 2, "a"), job("z", 4, 0, 3, "b"))
    cycle = CycleInput(TWO, (), pending, T0 + timedelta(minutes=1), queues=INTELLIGENT)
    result = plan_cycle(cycle)
    assert admitted(result) == ["x"]
    assert [(p.job, p.cohort_position) for p in result.pending] == [("z", 1)]
    # with fair sharing (equal shares) the tie goes to the aged priority as well
    assert admitted(plan_cycle(replace(cycle, fair_sharing=True))) == ["x"]


# --- queue settings are refused as the quota file refuses them ------------------------


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("balance_timeout", timedelta(0), "balance_timeout: 0:00:00 is not a positive duration"),
        ("balance_timeout", -TEN, "balance_timeout: -1 day, 23:50:00 is not a positive"),
        ("aging_interval", timedelta(0), "aging_interval: 0:00:00 is not a positive duration"),
        ("policy", "Fifo", "queue policy 'Fifo' is not one of"),
        ("on_unfit_head", "Drop", "on_unfit_head 'Drop' is not one of Retry, Skip"),
    ],
)
def test_queue_settings_refuse_what_the_quota_file_refuses(
    field: str, value: object, message: str
) -> None:
    with pytest.raises(Invalid, match=message):
        QueueSettings(**{field: value})  # type: ignore[arg-type]


def test_the_shortest_timeout_the_file_allows_is_accepted() -> None:
    settings = QueueSettings("Balance", balance_timeout=timedelta(seconds=1))
    assert balance_window(BALANCE[0], settings, T0 + timedelta(minutes=1)) == 35 * 60


# --- a job that can never fit: retried at the head, or skipped ------------------------

# a leaf of 4 GPUs capped at 6 in a tree of 16: an 8-GPU job can never fit
CAPPED = (QuotaNode("root", min={"gpu": 16}), QuotaNode("a", "root", {"gpu": 4}, {"gpu": 6}))
UNFIT = (job("huge", 8, 0), job("s1", 1, 1), job("s2", 1, 2))


def _unfit(
    policy: QueuePolicyName,
    unfit: UnfitHeadPolicy | None = None,
    pending: tuple[Incoming, ...] = UNFIT,
    minutes: float = 5,
) -> CycleResult:
    settings = QueueSettings(policy, balance_timeout=TEN)
    if unfit is not None:
        settings = replace(settings, on_unfit_head=unfit)
    now = T0 + timedelta(minutes=minutes)
    return plan_cycle(CycleInput(CAPPED, BUSY, pending, now, queues={"a": settings}))


@pytest.mark.parametrize("policy", ["FIFO", "StrictFIFO"])
def test_by_default_a_head_that_never_fits_is_retried_and_holds_its_queue(
    policy: QueuePolicyName,
) -> None:
    result = _unfit(policy)
    assert QueueSettings().on_unfit_head == "Retry"
    assert admitted(result) == []
    assert [(p.job, p.reason, p.position, p.held_by) for p in result.pending] == [
        ("huge", "ExceedsMaxQuota", 1, None),
        ("s1", "WaitingForQuota", 2, "huge"),
        ("s2", "WaitingForQuota", 3, "huge"),
    ]


@pytest.mark.parametrize("policy", ["FIFO", "StrictFIFO"])
def test_skip_sets_a_head_that_never_fits_aside(policy: QueuePolicyName) -> None:
    result = _unfit(policy, "Skip")
    assert admitted(result) == ["s1", "s2"]
    assert [(p.job, p.reason, p.held_by) for p in result.pending] == [
        ("huge", "ExceedsMaxQuota", None)
    ]


def test_balance_retries_an_unfit_head_until_its_timeout_then_round_robins() -> None:
    assert admitted(_unfit("Balance", minutes=5)) == []
    # after one timeout the window is 2: huge and s1 are tried, s1 fits, s2 too
    assert admitted(_unfit("Balance", minutes=15)) == ["s1", "s2"]
    assert admitted(_unfit("Balance", "Skip", minutes=5)) == ["s1", "s2"]


def test_intelligent_retries_an_unfit_job_of_the_fifo_band_only() -> None:
    high = (job("huge", 8, 0, 8), job("s1", 1, 1, 2))
    assert admitted(_unfit("Intelligent", pending=high)) == []
    assert admitted(_unfit("Intelligent", "Skip", pending=high)) == ["s1"]
    low = (job("huge", 8, 0, 5), job("s1", 1, 1, 2))
    assert admitted(_unfit("Intelligent", pending=low)) == ["s1"]


@pytest.mark.parametrize("policy", ["RoundRobin", "Priority", "BestEffortFIFO"])
def test_policies_that_skip_a_blocked_job_skip_an_unfit_one_either_way(
    policy: QueuePolicyName,
) -> None:
    for unfit in ("Retry", "Skip"):
        result = _unfit(policy, unfit)  # type: ignore[arg-type]
        assert admitted(result) == ["s1", "s2"], unfit
        # it is not parked either: nothing that frees capacity makes it fit
        assert [(p.job, p.reason) for p in result.pending] == [("huge", "ExceedsMaxQuota")]
        assert result.parked == frozenset()
