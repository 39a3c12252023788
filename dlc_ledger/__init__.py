"""The composition root: the command line (``cli/``, and ``api/`` beside it), configuration
and service wiring (``wiring/``), and the use cases both call (``services/``). Nothing in
``consumers``, ``projections`` or ``ledger`` imports it."""
