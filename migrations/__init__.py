"""Alembic migrations of DLC Ledger's database (applied by ``dlc-ledger db upgrade``)."""
