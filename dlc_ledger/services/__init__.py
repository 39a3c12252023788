"""Use cases the CLI and the API both call: plain arguments in, plain results out.

One package per context (``billing``, ``budgets``, ``quotas``, ``notifications``,
``dispatch``, ``subscriptions``, the store's own ``store`` and the API's ``access``), each
reached through its ``__init__``; shared by several at the root: ``errors``, ``clocks``
and ``yaml_files``. Rows shaped for an edge are the presenters' (:mod:`dlc_ledger.presenters`)."""
