"""The chaos replay (``python -m chaos``): the pipeline as deployed, broken on purpose.

Two runs of one openb slice, each on its own PostgreSQL, broker and kubesim, every
component as its production command in a process of its own under a restarting
supervisor: a clean run, and a run with faults injected at seeded moments. Their stored
facts and every report are then compared (docs/chaos.md).
"""
