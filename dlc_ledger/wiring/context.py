"""Resolving configuration into live parts: the database URL, the store, the broker.

The composition root's one place for "where is everything": commands call these
instead of reading the environment themselves.
"""

from __future__ import annotations

import sys
from functools import cache

from dlc_ledger.wiring.embedded_postgres import embedded_database_url
from dlc_ledger.wiring.settings import Settings, load_settings
from ledger.store.engines import make_engine, normalise_url
from ledger.store.migrations import upgrade
from ledger.store.postgres import PostgresEventStore

__all__ = ["database_url", "kafka_bootstrap", "open_store", "settings"]


@cache
def settings() -> Settings:
    return load_settings()


def database_url(*, announce: bool = True, create: bool = False) -> str:
    """``DATABASE_URL``, or the embedded server's (started if needed).

    Only ``create`` makes a new embedded database (``demo``, ``replay``, ``db upgrade``,
    ``watch``, ``ingest``); otherwise a data directory without one is an error.
    """
    cfg = settings()
    if cfg.database_url:
        return normalise_url(cfg.database_url)
    url = embedded_database_url(cfg.data_dir, create=create)
    if announce:
        print(f"using embedded PostgreSQL under {cfg.data_dir / 'postgres'}", file=sys.stderr)
    return url


def open_store(
    *, migrate: bool = True, announce: bool = True, create: bool = False
) -> PostgresEventStore:
    """The store, with migrations applied first (idempotent) unless told otherwise."""
    engine = make_engine(database_url(announce=announce, create=create))
    if migrate:
        upgrade(engine)
    return PostgresEventStore(engine)


def kafka_bootstrap(*, start: bool = True) -> str:
    """``KAFKA_BOOTSTRAP``, or the embedded broker's (started if needed)."""
    cfg = settings()
    if cfg.kafka_bootstrap:
        return cfg.kafka_bootstrap
    from dlc_ledger.wiring.broker import EmbeddedBroker

    broker = EmbeddedBroker(cfg.data_dir / "broker", topic=cfg.topic, partitions=cfg.partitions)
    status = broker.start() if start else broker.status()
    if not status.running:
        raise RuntimeError("the embedded broker is not running: dlc-ledger broker start")
    return broker.bootstrap
