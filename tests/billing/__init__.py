"""Pure billing tests: money, prices, rating, ledger transactions, invoices (no database)."""
