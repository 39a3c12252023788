"""The dispatcher's side of the read models: its input read from projected state, its
decisions folded back, and the answers built on them (why a job waits, a quota's queue,
start estimates, waits, preemptions and goodput).

``reads`` is a cycle's input; ``decisions`` the latest decision per job (a projection);
``explain`` why a job waits or was preempted; ``queues`` a quota's queue; ``estimates``
start and end estimates and their ranges; ``limits`` the maximum run times jobs declared;
``losses`` what a preemption lost; ``reports`` waits, preemptions, goodput and how good the
stored estimates were. The decisions themselves are pure functions in ``ledger.dispatch``.
"""
