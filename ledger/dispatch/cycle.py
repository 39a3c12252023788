"""One dispatcher cycle, pure: the quota tree, the admitted workloads and the pending
queue in; every admission, preemption and pending reason of the cycle out.

A cycle admits as many jobs as fit (no one-pop-per-queue ceiling, Kueue #14477); a job
that preempts is not admitted in the cycle that preempts (its victims must stop first).
The live loop (``consumers/dispatcher``), the closed-loop replay and the benchmark all
call :func:`plan_cycle`; ``jobs why`` reads its :class:`PendingStatus`.

The cycle runs in rounds, as Kueue's scheduler does cycle after cycle: each leaf quota's
queue offers its next job (in its policy's order, :mod:`ledger.dispatch.queues`); the
offered jobs compete across quotas (fair sharing: Kueue's tournament by dominant resource
share; else jobs that need no borrowing first, then priority, then queue time); each is decided
against the state the ones before it left. One :class:`~ledger.dispatch.preemption.Decider`
(capacity tree and candidates by quota) serves the whole cycle, kept in step as jobs are
admitted and reserved: a decision costs the tree's depth and its candidates, not the size
of the admitted set.

A preemptor reserves what it asked for and its victims stay counted until they have
stopped, so no capacity is handed out twice; a later preemptor that would need a victim
already taken (or a reservation, or a job admitted in this cycle) waits for the next
cycle, as Kueue skips a workload with overlapping preemption targets.

Services and notebooks (:mod:`ledger.dispatch.workloads`): a service's pending replicas
queue as jobs do, one unit each; a workload on an inner quota runs on its own leaf (the
results name the inner quota); a notebook never queues: before the rounds, each is
admitted if it fits, preempts if the policies allow a victim set (and then waits only for
its victims, as any preemptor), or is refused (:class:`Refusal`). A service replica
that may spill over (``Incoming.spillover``) and neither fits nor finds a victim its
quota's policies allow — or never fits, or waits behind a blocked head, or was parked — is
admitted on public resources
instead of waiting (``Decision.spillover``): outside the quota, it takes nothing from the
tree, so later decisions of the cycle (and later cycles: the live loop leaves spilled
replicas out of ``admitted``) do not count it.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from ledger.dispatch.capacity import Tree
from ledger.dispatch.model import Admitted, Decision, DispatchError, Incoming, QuotaNode, Snapshot
from ledger.dispatch.preemption import IDLE, Decider
from ledger.dispatch.queues import (
    QueuePolicyName,
    QueueRun,
    QueueSettings,
    queue_order,
    rank_key,
)
from ledger.dispatch.shares import share
from ledger.dispatch.workloads import moved, own_leaf, place, public_quota

__all__ = [
    "CycleInput",
    "CycleResult",
    "PendingReason",
    "PendingStatus",
    "QueuePolicyName",
    "QueueSettings",
    "Refusal",
    "RefusalReason",
    "placed",
    "plan_cycle",
    "relevant_changes",
]

PendingReason = Literal[
    "ExceedsMaxQuota",
    "WaitingForQuota",
    "PreemptionPending",
    "BudgetExhausted",
    "SubscriptionExpired",
    "Parked",
]

#: why a notebook is refused at start: it does not fit now, even with the preemption its
#: quota's policies allow (``InsufficientQuota``), or never could, or may not run at all
RefusalReason = Literal[
    "InsufficientQuota", "ExceedsMaxQuota", "BudgetExhausted", "SubscriptionExpired"
]

_DEFAULT_QUEUE = QueueSettings()
_Outcome = Literal["admitted", "preempting", "overlap", "no-fit", "spilled"]


@dataclass(frozen=True)
class CycleInput:
    quotas: tuple[QuotaNode, ...]
    admitted: tuple[Admitted, ...]
    #: pending jobs, any order (``created_at`` is when the job was queued)
    pending: tuple[Incoming, ...]
    now: datetime
    #: queue settings by leaf quota; a quota missing here gets ``QueueSettings()``
    queues: Mapping[str, QueueSettings] = field(default_factory=dict)
    #: jobs BestEffortFIFO parked in an earlier cycle, retried when something relevant changes
    parked: frozenset[str] = frozenset()
    #: workspaces whose ``stop`` budget is exhausted: nothing of theirs is admitted
    blocked_workspaces: frozenset[str] = frozenset()
    #: quotas drawing on resource groups with no subscribed capacity left (expired or
    #: cancelled): nothing of theirs is admitted onto released capacity
    expired_quotas: frozenset[str] = frozenset()
    #: preemptors whose victims are still being stopped: they wait, nothing new is decided
    preempting: frozenset[str] = frozenset()
    #: preemptors whose victims have stopped: offered first, before every queue, so the
    #: capacity they freed is theirs (Kueue keeps a preemptor's reservation); without it a
    #: requeued victim offered in an earlier round takes it back and the preemption repeats
    reserved: frozenset[str] = frozenset()
    #: quotas (any node: its whole tree counts) where, since the cycle that parked, capacity
    #: was freed or the tree changed: their parked jobs are retried (Kueue requeues its
    #: inadmissible workloads on the same events); :func:`relevant_changes` computes it
    requeue: frozenset[str] = frozenset()
    #: Kueue's fair sharing (``fair_sharing: true`` on a tree's root)
    fair_sharing: bool = False


@dataclass(frozen=True)
class PendingStatus:
    job: str
    quota: str
    reason: PendingReason
    #: 1-based position in its quota's queue and in its whole tree (cohort), in policy order
    position: int
    cohort_position: int
    #: the job ahead whose failure stopped the queue before this one was tried (a holding
    #: head, a full Balance window), if any
    held_by: str | None = None


@dataclass(frozen=True)
class Refusal:
    """A notebook refused at start: it is not queued (docs/dispatch.md)."""

    job: str
    quota: str
    reason: RefusalReason


@dataclass(frozen=True)
class CycleResult:
    admissions: tuple[Decision, ...] = ()
    preemptions: tuple[Decision, ...] = ()
    pending: tuple[PendingStatus, ...] = ()
    #: every job parked after this cycle (the ones still parked and the newly parked)
    parked: frozenset[str] = frozenset()
    #: notebooks that do not fit now: refused, not queued
    refused: tuple[Refusal, ...] = ()


def relevant_changes(before: CycleInput, after: CycleInput) -> frozenset[str]:
    """The roots of the trees where something that may let a parked job in happened
    between two cycles: a job left the admitted set or shrank (capacity freed), or a
    quota of the tree was added, removed or changed. Pass it as ``after.requeue``."""
    parent = {q.name: q.parent for q in (*before.quotas, *after.quotas)}
    changed: set[str] = set()
    now_admitted = {wl.job: wl for wl in after.admitted}
    for wl in before.admitted:
        still = now_admitted.get(wl.job)
        if (
            still is None
            or any(still.resources.get(k, 0) < v for k, v in wl.resources.items())
            or still.quota != wl.quota
        ):
            changed.add(wl.quota)
    old = {q.name: q for q in before.quotas}
    new = {q.name: q for q in after.quotas}
    changed.update(n for n in old.keys() | new.keys() if old.get(n) != new.get(n))
    changed.update(
        n
        for n in before.queues.keys() | after.queues.keys()
        if before.queues.get(n) != after.queues.get(n)
    )
    return frozenset(_root(parent, n) for n in changed)


def _root(parent: Mapping[str, str | None], name: str) -> str:
    seen = {name}
    up = parent.get(name)
    while up is not None and up not in seen:
        seen.add(up)
        name = up
        up = parent.get(name)
    return name


class _Cycle:
    """The state of one cycle: the decider (capacity tree and candidates, kept in step as
    jobs are admitted and reserved), what is taken, the outcome so far."""

    def __init__(self, cycle: CycleInput) -> None:
        self.input = cycle
        self.decider = Decider(
            Snapshot(cycle.quotas, cycle.admitted, fair_sharing=cycle.fair_sharing)
        )
        self.tree = self.decider.tree
        self.empty = Tree(cycle.quotas, ())
        self.root_of = {name: self.tree.root(name) for name in self.tree.nodes}
        # what may be a victim, coarsely: lets a job with no possible candidate skip the
        # preemption search (Kueue's candidates all pass a priority policy, or are idle)
        self.lowest_in_quota: dict[str, int] = {}
        self.lowest_in_root: dict[str, int] = {}
        self.idle_in_root: dict[str, int] = {}
        # one tight pass: this is per admitted job and per cycle
        lowest = self.lowest_in_quota
        for wl in cycle.admitted:
            known = lowest.get(wl.quota)
            if known is None or wl.priority < known:
                lowest[wl.quota] = wl.priority
            if wl.billing_mode == IDLE:
                root = self.root_of[wl.quota]
                self.idle_in_root[root] = self.idle_in_root.get(root, 0) + 1
        for quota, priority in lowest.items():
            root = self.root_of[quota]
            self.lowest_in_root[root] = min(self.lowest_in_root.get(root, priority), priority)
        #: victims chosen this cycle, reservations and this cycle's admissions: no
        #: preemptor of this cycle may take them
        self.taken: set[str] = set()
        self.admissions: list[Decision] = []
        self.preemptions: list[Decision] = []
        self.reasons: dict[str, PendingReason] = {}
        self.parked: set[str] = set()
        #: jobs that can never fit, kept in their queue (``on_unfit_head: Retry``): offered,
        #: never attempted, blocked as any job that does not fit
        self.unfit: set[str] = set()
        self.held_by: dict[str, str] = {}
        #: service replicas admitted on public resources this cycle (outside the quota)
        self.spilled: set[str] = set()

    def rank(self, job: Incoming) -> tuple[int, datetime, str]:
        """The order of ``job`` in its queue (effective priority, queue time, name), which
        heads of different quotas compare by too."""
        return rank_key(job, self.input.queues.get(job.quota, _DEFAULT_QUEUE), self.input.now)

    def _index(self, wl: Admitted) -> None:
        root = self.root_of[wl.quota]
        self.lowest_in_quota[wl.quota] = min(
            self.lowest_in_quota.get(wl.quota, wl.priority), wl.priority
        )
        self.lowest_in_root[root] = min(self.lowest_in_root.get(root, wl.priority), wl.priority)
        if wl.billing_mode == IDLE:
            self.idle_in_root[root] = self.idle_in_root.get(root, 0) + 1

    def _count(self, job: Incoming) -> None:
        wl = job.admitted(self.input.now)
        self.decider.admit(wl)
        self._index(wl)
        # Kueue adds a cycle's admissions to the usage only: they are nobody's victims yet
        self.taken.add(job.job)

    def reserve(self, job: Incoming) -> None:
        """Hold ``job``'s request while its victims stop (they stay counted meanwhile)."""
        self._count(job)

    def admit(self, job: Incoming, decision: Decision) -> None:
        self._count(job)
        self.admissions.append(decision)

    def spill(self, job: Incoming) -> None:
        """Admit ``job`` on public resources: outside its quota, it counts against no
        quota, and no preemptor may take it (it is no candidate anywhere)."""
        self.reasons.pop(job.job, None)
        self.admissions.append(Decision(job.job, "admit", spillover=True))
        self.spilled.add(job.job)

    def _wait(self, job: Incoming, outcome: _Outcome) -> _Outcome:
        """``job`` does not fit and preempts nothing: it waits, or spills over."""
        if job.spillover:
            self.spill(job)
            return "spilled"
        self.reasons[job.job] = "WaitingForQuota"
        return outcome

    def ever_fits(self, job: Incoming) -> bool:
        """Whether ``job`` could fit with nothing else admitted (idle jobs may borrow past
        their own quota's ``max``: only the ancestors' and the root's bound them)."""
        return self.empty.fits(job.quota, _request(job), own_cap=job.billing_mode != IDLE)

    def may_find_victims(self, job: Incoming) -> bool:
        """False only when the decider surely finds no victim: no idle job in the tree,
        and nothing the quota's ``within_quota`` / ``reclaim`` policies could allow."""
        root = self.root_of[job.quota]
        if self.idle_in_root.get(root):
            return True
        policy = self.tree.nodes[job.quota].preemption
        own = self.lowest_in_quota.get(job.quota)
        if own is not None and (
            (policy.within_quota == "LowerPriority" and own < job.priority)
            or (policy.within_quota == "LowerOrNewerEqualPriority" and own <= job.priority)
        ):
            return True
        lowest = self.lowest_in_root.get(root)
        if lowest is None or policy.reclaim == "Never":
            return False
        return policy.reclaim == "Any" or lowest < job.priority

    def attempt(self, job: Incoming) -> _Outcome:
        """Decide ``job`` against the cycle's current state."""
        request = _request(job)
        fits = self.tree.fits(job.quota, request, own_cap=job.billing_mode != IDLE)
        if fits:
            self.admit(job, Decision(job.job, "admit"))
            return "admitted"
        if job.billing_mode == IDLE or not self.may_find_victims(job):
            # an idle job never preempts: it runs on what is idle, past its own max
            return self._wait(job, "no-fit")
        decision = self.decider.decide(job)
        if decision.outcome == "admit":
            self.admit(job, decision)
            return "admitted"
        if decision.outcome == "preempt":
            victims = {v.job for v in decision.victims}
            if victims & self.taken:
                # overlapping targets: another preemptor of this cycle has them; Kueue
                # retries such a workload next cycle (it is not parked). It found victims
                # its policies allow: a spillover replica waits too, to preempt next cycle
                self.reasons[job.job] = "WaitingForQuota"
                return "overlap"
            self.taken |= victims
            self.preemptions.append(decision)
            self.reserve(job)
            self.reasons[job.job] = "PreemptionPending"
            return "preempting"
        return self._wait(job, "no-fit")


def placed(cycle: CycleInput) -> CycleInput:
    """``cycle`` with the workloads of inner quotas on their own leaves, which take their
    quota's queue settings and expiry."""
    quotas, inner = place(cycle.quotas, (*cycle.admitted, *cycle.pending))
    if not inner:
        return cycle
    queues = dict(cycle.queues)
    for q in inner:
        queues[own_leaf(q)] = cycle.queues.get(q, _DEFAULT_QUEUE)
    return replace(
        cycle,
        quotas=quotas,
        admitted=tuple(moved(wl, inner) for wl in cycle.admitted),
        pending=tuple(moved(job, inner) for job in cycle.pending),
        queues=queues,
        expired_quotas=cycle.expired_quotas | {own_leaf(q) for q in inner & cycle.expired_quotas},
    )


def plan_cycle(cycle: CycleInput) -> CycleResult:
    """Every decision of one cycle, in the queue policies' order (module docstring)."""
    cycle = placed(cycle)
    state = _Cycle(cycle)
    requeued = {state.root_of.get(q, q) for q in cycle.requeue}
    queues: dict[str, list[Incoming]] = {}
    notebooks: list[Incoming] = []
    running = {wl.job for wl in cycle.admitted}
    seen: set[str] = set()
    for job in cycle.pending:
        if job.job in running or job.job in seen:
            where = "admitted and pending" if job.job in running else "pending twice"
            raise DispatchError(f"job {job.job!r} is {where}")
        seen.add(job.job)
        if job.quota not in state.tree.nodes:
            raise DispatchError(f"job {job.job!r}: unknown quota {job.quota!r}")
        if not state.tree.is_leaf(job.quota):
            raise DispatchError(
                f"job {job.job!r}: quota {job.quota!r} has children: only leaf quotas run jobs"
            )
        if job.workload == "notebook":
            notebooks.append(job)
            continue
        queues.setdefault(job.quota, []).append(job)
    ordered = {
        quota: queue_order(jobs, cycle.queues.get(quota, _DEFAULT_QUEUE), cycle.now)
        for quota, jobs in queues.items()
    }
    for job in cycle.pending:
        if job.job in cycle.preempting:
            state.reserve(job)
    first = _admit_reserved(state, [*notebooks, *(j for q in ordered.values() for j in q)])
    refused = _start_notebooks(state, [j for j in notebooks if j.job not in first])
    runs: list[QueueRun] = []
    for quota, jobs in ordered.items():
        settings = cycle.queues.get(quota, _DEFAULT_QUEUE)
        active: list[Incoming] = []
        for job in jobs:
            if job.job in first:
                continue
            reason = _not_tried(state, job, settings.policy, requeued)
            if reason is None:
                active.append(job)
            elif job.spillover and reason in ("ExceedsMaxQuota", "Parked"):
                state.spill(job)  # it never fits (or did not, and nothing changed)
            else:
                state.reasons[job.job] = reason
                if reason == "Parked":
                    state.parked.add(job.job)
                elif reason == "ExceedsMaxQuota" and settings.on_unfit_head == "Retry":
                    # the platform's rule: the head is retried, never skipped
                    state.unfit.add(job.job)
                    active.append(job)
        runs.append(QueueRun(quota, active, settings, cycle.now))
    _rounds(state, runs)
    for run in runs:
        held = run.untried()
        for job in held:
            if job.spillover:
                state.spill(job)  # held behind a blocked head: it need not wait
        if run.held_by is not None:
            state.held_by.update((j.job, run.held_by.job) for j in held if not j.spillover)
    admitted = {d.job for d in state.admissions}
    waiting = {quota: [j for j in jobs if j.job not in admitted] for quota, jobs in ordered.items()}
    # a notebook waits only for its victims: in no queue, it has no place in one
    starting = tuple(
        PendingStatus(j.job, j.quota, "PreemptionPending", 0, 0)
        for j in notebooks
        if j.job not in admitted and j.job not in {r.job for r in refused}
    )
    pending = tuple(
        replace(p, quota=public_quota(p.quota)) for p in (*_positions(state, waiting), *starting)
    )
    return CycleResult(
        tuple(state.admissions),
        tuple(state.preemptions),
        pending,
        frozenset(state.parked),
        refused,
    )


def _start_notebooks(state: _Cycle, notebooks: list[Incoming]) -> tuple[Refusal, ...]:
    """Admit, preempt for, or refuse each notebook (priority, then creation): never queued.
    A notebook whose victims are still stopping waits for them (``preempting``)."""
    cycle = state.input
    refused: list[Refusal] = []
    for job in sorted(notebooks, key=lambda j: (-j.priority, j.created_at, j.job)):
        reason: RefusalReason | None = None
        if job.job in cycle.preempting:
            continue
        if job.workspace and job.workspace in cycle.blocked_workspaces:
            reason = "BudgetExhausted"
        elif job.quota in cycle.expired_quotas:
            reason = "SubscriptionExpired"
        elif not state.ever_fits(job):
            reason = "ExceedsMaxQuota"
        else:
            outcome = state.attempt(job)
            if outcome not in ("admitted", "preempting"):
                reason = "InsufficientQuota"
        if reason is not None:
            state.reasons.pop(job.job, None)
            refused.append(Refusal(job.job, public_quota(job.quota), reason))
    return tuple(refused)


def _admit_reserved(state: _Cycle, ordered: list[Incoming]) -> set[str]:
    """Admit the preemptors whose victims have stopped, if they fit, before any round
    (priority, then queue time); one that no longer fits competes in the rounds as usual.
    Returns the jobs admitted."""
    cycle = state.input
    candidates = [
        j
        for j in ordered
        if j.job in cycle.reserved
        and j.job not in cycle.preempting
        and not (j.workspace and j.workspace in cycle.blocked_workspaces)
        and j.quota not in cycle.expired_quotas
    ]
    admitted: set[str] = set()
    for job in sorted(candidates, key=lambda j: (-j.priority, j.created_at, j.job)):
        if state.tree.fits(job.quota, _request(job), own_cap=job.billing_mode != IDLE):
            state.admit(job, Decision(job.job, "admit"))
            admitted.add(job.job)
    return admitted


def _not_tried(
    state: _Cycle, job: Incoming, policy: QueuePolicyName, requeued: set[str]
) -> PendingReason | None:
    """Why ``job`` is not offered in this cycle at all, or None when it is."""
    cycle = state.input
    if job.workspace and job.workspace in cycle.blocked_workspaces:
        return "BudgetExhausted"
    if job.quota in cycle.expired_quotas:
        return "SubscriptionExpired"
    if not state.ever_fits(job):
        return "ExceedsMaxQuota"
    if (
        policy == "BestEffortFIFO"
        and job.job in cycle.parked
        and state.root_of[job.quota] not in requeued
    ):
        return "Parked"
    return None


def _rounds(state: _Cycle, runs: list[QueueRun]) -> None:
    """Offer each queue's next job, let the offers compete, decide them; again until every
    queue is done (blocked, held or empty)."""
    active = runs
    while active:
        offers: list[tuple[QueueRun, Incoming]] = []
        still: list[QueueRun] = []
        for run in active:
            job = run.next()
            if job is None:
                continue
            still.append(run)
            offers.append((run, job))
        for run, job in _compete(state, offers):
            if job.job in state.unfit:
                run.blocked(job)  # its reason is ExceedsMaxQuota already
                continue
            if job.job in state.input.preempting:
                state.reasons[job.job] = "PreemptionPending"
                run.blocked(job)
                continue
            outcome = state.attempt(job)
            if outcome in ("admitted", "spilled"):
                continue
            if outcome == "no-fit" and run.settings.policy == "BestEffortFIFO":
                state.reasons[job.job] = "Parked"
                state.parked.add(job.job)
            run.blocked(job)
        active = still


_Offer = tuple[QueueRun, Incoming]


def _compete(state: _Cycle, offers: list[_Offer]) -> list[_Offer]:
    """Kueue's order of the heads of a round across queues. Without fair sharing: jobs that
    need no borrowing (usage + request within the leaf's ``min``) first, then priority,
    then queue time. With fair sharing, Kueue's tournament: in each tree, from the root
    down, the child subtree whose dominant resource share, with its best job's request
    in, is lowest wins (ties: priority, queue time)."""
    if not state.input.fair_sharing:
        tree = state.tree

        def key(offer: _Offer) -> tuple[bool, tuple[int, datetime, str]]:
            job = offer[1]
            borrows = any(
                tree.raw_usage(job.quota, k) + v > tree.min(job.quota, k)
                for k, v in _request(job).items()
            )
            return (borrows, state.rank(job))

        return sorted(offers, key=key)
    by_root: dict[str, list[_Offer]] = {}
    for offer in offers:
        by_root.setdefault(state.root_of[offer[1].quota], []).append(offer)
    return [o for root in sorted(by_root) for o in _tournament(state, root, by_root[root])]


def _tournament(state: _Cycle, node: str, offers: list[_Offer]) -> list[_Offer]:
    """``offers`` (all below ``node``) in fair-sharing order: each child's own order, merged
    by the child's share with its current best job in."""
    tree = state.tree
    if tree.is_leaf(node):
        return sorted(offers, key=lambda o: state.rank(o[1]))
    depth = len(tree.ancestry(node))
    below: dict[str, list[_Offer]] = {}
    for offer in offers:
        path = tree.ancestry(offer[1].quota)
        below.setdefault(path[len(path) - depth - 1], []).append(offer)
    lists = {child: _tournament(state, child, group) for child, group in below.items()}

    def entry(child: str, i: int) -> tuple[tuple[bool, float], tuple[int, datetime, str], str, int]:
        job = lists[child][i][1]
        drs = share(tree, job.quota, _request(job), of=child).sort_key
        return (drs, state.rank(job), child, i)

    heap = [entry(child, 0) for child in lists]
    heapq.heapify(heap)
    out: list[_Offer] = []
    while heap:
        *_, child, i = heapq.heappop(heap)
        out.append(lists[child][i])
        if i + 1 < len(lists[child]):
            heapq.heappush(heap, entry(child, i + 1))
    return out


def _positions(state: _Cycle, waiting: Mapping[str, list[Incoming]]) -> tuple[PendingStatus, ...]:
    """Each waiting job's position in its quota's queue (policy order) and in its tree's:
    the quotas' queues merged, their heads compared by the key each queue is ordered by
    (effective priority, then queue time: :func:`~ledger.dispatch.queues.rank_key`)."""
    out: list[PendingStatus] = []
    by_root: dict[str, list[str]] = {}
    for quota in waiting:
        by_root.setdefault(state.root_of[quota], []).append(quota)
    for root in sorted(by_root):
        heads: list[tuple[tuple[int, datetime, str], str, int]] = []
        for quota in by_root[root]:
            jobs = waiting[quota]
            if jobs:
                heads.append((state.rank(jobs[0]), quota, 0))
        heapq.heapify(heads)
        cohort = 0
        while heads:
            _, quota, i = heapq.heappop(heads)
            job = waiting[quota][i]
            cohort += 1
            out.append(
                PendingStatus(
                    job.job,
                    quota,
                    state.reasons.get(job.job, "WaitingForQuota"),
                    i + 1,
                    cohort,
                    state.held_by.get(job.job),
                )
            )
            if i + 1 < len(waiting[quota]):
                heapq.heappush(heads, (state.rank(waiting[quota][i + 1]), quota, i + 1))
    return tuple(out)


def _request(job: Incoming) -> dict[str, float]:
    return {k: v for k, v in job.resources.items() if v > 0}
