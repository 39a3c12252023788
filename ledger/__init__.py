"""DLC Ledger's domain core: events, money, rating and quota rules.

Nothing in this package performs network IO. The PostgreSQL adapter of the event
store lives in :mod:`ledger.store`; the domain modules never import it.
"""
