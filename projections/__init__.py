"""Read models built from the event store: job state and audit, quota usage, inventory, billing.

Projection code here is plain classes over typed events, folded inside a transaction
someone else opened: the runner in :mod:`consumers.projector` opens one per step and
saves the checkpoints. Two callers do it differently:
:func:`projections.billing.projection.catch_up_on`
borrows its caller's transaction (the rater's, the period close's) and advances the
billing checkpoint there, and the rater (:mod:`processes.billing.rater`), an
event-writing process, opens its own transactions on the store. The tables of every read
model are declared on one ``MetaData`` (:mod:`projections.schema`).
"""
