"""Process steps: what reacts to the ledger's state by appending new facts.

A read model (``projections/``) folds events into views and never appends. What reads
those views and appends decisions lives here, one package per bounded context: billing
(rating and accrual, period close, voids and credit notes), budgets (the budget check),
subscriptions (renewals, expiries, daily recognition), and the one billing tick that runs
them in order (:mod:`processes.tick`). The CLI, the API and the schedulers all call these
same functions (the ``eventsourcing`` library's process applications, Cosmic Python's
handlers). ``tests/processes/test_appenders.py`` keeps the map of every appending module.
"""
