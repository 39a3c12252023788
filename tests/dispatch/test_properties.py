"""Hypothesis properties of the decision core over random two-level trees (a root and its
leaf quotas), one resource key. The capacity check here is written independently of
:mod:`ledger.dispatch.capacity`: with leaves ``i`` (min ``m``, usage ``u``, unlendable
part ``g = m - lend_limit``), the root holds ``sum(max(u, g)) <= capacity``, and each leaf
``u <= max``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.dispatch import (
    Admitted,
    BorrowWithin,
    Incoming,
    Preemption,
    QuotaNode,
    Snapshot,
    decide,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
KEY = "cpu"


def holds(quotas: tuple[QuotaNode, ...], usage: dict[str, float]) -> bool:
    root, leaves = quotas[0], quotas[1:]
    capacity = (root.min or {}).get(KEY, sum((q.min or {}).get(KEY, 0) for q in leaves))
    total = 0.0
    for q in leaves:
        m = (q.min or {}).get(KEY, 0)
        u = usage.get(q.name, 0)
        if KEY in q.max and u > q.max[KEY]:
            return False
        g = m - q.lend_limit[KEY] if KEY in q.lend_limit else 0
        total += max(u, g)
    return total <= capacity


def usage_of(admitted: list[Admitted]) -> dict[str, float]:
    out: dict[str, float] = {}
    for wl in admitted:
        out[wl.quota] = out.get(wl.quota, 0) + wl.resources.get(KEY, 0)
    return out


@st.composite
def worlds(draw: st.DrawFn) -> tuple[Snapshot, Incoming]:
    n = draw(st.integers(2, 4))
    leaves = []
    for i in range(n):
        m = draw(st.integers(0, 6))
        cap = draw(st.none() | st.integers(m, 12))
        lend = draw(st.none() | st.integers(0, m))
        pre = Preemption(
            within_quota=draw(
                st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"])
            ),
            reclaim=draw(st.sampled_from(["Never", "LowerPriority", "Any"])),
            borrow_within=BorrowWithin(
                draw(st.sampled_from(["Never", "LowerPriority"])),
                draw(st.none() | st.integers(-2, 2)),
            ),
        )
        leaves.append(
            QuotaNode(
                f"q{i}",
                "root",
                {KEY: m},
                {} if cap is None else {KEY: cap},
                {} if lend is None else {KEY: lend},
                pre,
            )
        )
    pool = draw(st.integers(0, 4))
    own_min = draw(st.booleans())
    root = QuotaNode(
        "root", None, {KEY: sum((q.min or {})[KEY] for q in leaves) + pool} if own_min else None
    )
    quotas = (root, *leaves)
    # admitted: built by admitting only what the core admits
    admitted: list[Admitted] = []
    for j in range(draw(st.integers(0, 10))):
        wl = Admitted(
            f"j{j}",
            f"q{draw(st.integers(0, n - 1))}",
            draw(st.integers(-2, 2)),
            {KEY: draw(st.integers(1, 5))},
            T0 + timedelta(minutes=draw(st.integers(0, 100))),
        )
        probe = Incoming(wl.job, wl.quota, wl.priority, wl.resources, wl.admitted_at)
        if decide(Snapshot(quotas, tuple(admitted)), probe).outcome == "admit":
            admitted.append(wl)
    incoming = Incoming(
        "in",
        f"q{draw(st.integers(0, n - 1))}",
        draw(st.integers(-2, 2)),
        {KEY: draw(st.integers(1, 8))},
        T0 + timedelta(minutes=draw(st.integers(0, 100))),
    )
    return Snapshot(quotas, tuple(admitted)), incoming


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_decisions_keep_capacity_and_are_minimal(world: tuple[Snapshot, Incoming]) -> None:
    snap, inc = world
    quotas = snap.quotas
    before = usage_of(list(snap.admitted))
    assert holds(quotas, before)
    d = decide(snap, inc)
    by_job = {wl.job: wl for wl in snap.admitted}
    after_admit = dict(before)
    after_admit[inc.quota] = after_admit.get(inc.quota, 0) + inc.resources[KEY]
    if d.outcome == "admit":
        assert holds(quotas, after_admit)
        return
    if d.outcome == "pending":
        assert d.victims == ()
        return
    assert d.victims
    victims = [by_job[v.job] for v in d.victims]
    rest = [wl for wl in snap.admitted if wl not in victims]
    fitted = usage_of(rest)
    fitted[inc.quota] = fitted.get(inc.quota, 0) + inc.resources[KEY]
    # the incoming fits once the victims are gone
    assert holds(quotas, fitted)
    own = next(q for q in quotas if q.name == inc.quota)
    own_min = (own.min or {}).get(KEY, 0)
    borrowing = fitted[inc.quota] > own_min
    policies = own.preemption
    for v, wl in zip(d.victims, victims, strict=True):
        # minimal: putting any one victim back makes the incoming not fit (in the same
        # mode: without borrowing when the set was found without borrowing)
        back = dict(fitted)
        back[wl.quota] = back.get(wl.quota, 0) + wl.resources[KEY]
        assert not holds(quotas, back) or (not borrowing and back[inc.quota] > own_min)
        # the policies allow it
        if wl.quota == inc.quota:
            assert v.reason == "WithinQuota"
            assert policies.within_quota != "Never"
            assert wl.priority < inc.priority or (
                policies.within_quota == "LowerOrNewerEqualPriority"
                and wl.priority == inc.priority
                and wl.admitted_at > inc.created_at
            )
        else:
            assert v.reason in ("Reclaim", "ReclaimWhileBorrowing")
            assert policies.reclaim != "Never"
            if policies.reclaim == "LowerPriority":
                assert wl.priority < inc.priority
            # no quota within its min loses a job to another quota
            victim_quota = next(q for q in quotas if q.name == wl.quota)
            assert before.get(wl.quota, 0) > (victim_quota.min or {}).get(KEY, 0)
            if v.reason == "ReclaimWhileBorrowing":
                assert policies.borrow_within.policy == "LowerPriority"
