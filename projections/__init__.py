"""Read models built from the event store: job state and audit, quota usage, inventory, billing.

Projection code here is plain classes over typed events; the runner in
:mod:`consumers.projector` owns transactions and checkpoints.
"""
