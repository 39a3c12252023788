"""``dlc-ledger up``: every component of the service in one process, until Ctrl-C.

The order is the data's: the database (embedded when ``DATABASE_URL`` is unset, migrated
when behind), the broker (embedded Tansu when ``KAFKA_BOOTSTRAP`` is unset), the cluster side
(kubesim replaying a trace when no kubeconfig is given, else the watchers on that cluster)
with the ingest consumer, then the projector, billing, the dispatcher and the API with its
dashboard. Each part is the runner its own command uses (:mod:`~dlc_ledger.wiring.
components`) on a thread under a :class:`~dlc_ledger.wiring.supervisor.Supervisor`: a part
that fails stops the service, and the error names it.

Each part connects to PostgreSQL as its role's login (docs/store.md, "Roles"): only the
migration, first and alone, as the schema owner (its connection closed before anything
starts); the API as a ``dlc_ledger_reader`` login (its writes as a writer); ingest, the
watchers, the projector, billing, notifications and the dispatcher as a
``dlc_ledger_writer`` login. Each names itself in ``pg_stat_activity``
(``application_name`` ``dlc-ledger-<part>``). On the embedded database the logins are its
own; with ``DATABASE_URL`` they are ``DATABASE_URL_READER`` / ``_WRITER``, and without those
every part connects as ``DATABASE_URL``'s login, which ``up`` says on stderr.

Once everything serves, an admin token named ``up-admin`` is created (a secret is stored
hashed, so one cannot be shown again: each run makes its own), valid for
:data:`TOKEN_LIFETIME`, and the earlier runs' ``up-admin`` tokens are revoked, so they do
not pile up; the run revokes its own when it stops (the expiry bounds a killed run's).

What ``up`` starts it stops: the embedded PostgreSQL and the embedded broker are stopped
when ``up`` ends if it was ``up`` that started them (:class:`EmbeddedServices`); one that
was already running when ``up`` began (another command's, a demo's) is left running, and
``--keep-services`` leaves both (``dlc-ledger db stop`` / ``broker stop`` end them later).

With kubesim the dispatcher runs by default: open-loop replay creates jobs unsuspended (the
trace says when they start), so it admits nothing, but it exports the quota gauges
(``dlc_quota_*``) every cycle and would act on any job created suspended. On a real cluster
it acts on that cluster, so it runs only when asked (``--dispatch``).
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from kubernetes import client
from sqlalchemy import text

from dlc_ledger.wiring import context
from dlc_ledger.wiring.components import (
    ReplayParts,
    api_component,
    billing_component,
    dispatcher_component,
    ingest_component,
    notifications_component,
    projector_component,
    replay_component,
    watcher_component,
)
from dlc_ledger.wiring.runs import OPEN_LOOP
from dlc_ledger.wiring.supervisor import Supervisor
from kubesim.driver import Speed
from ledger.canonical import format_timestamp
from ledger.errors import Conflict
from ledger.store.postgres import PostgresEventStore

__all__ = ["TOKEN_LIFETIME", "TOKEN_NAME", "EmbeddedServices", "Running", "UpPlan", "run_up"]

#: the name of the admin token each run creates (and the next run revokes)
TOKEN_NAME = "up-admin"
#: how long it is valid: a working day's run; a killed run's token dies on its own too
TOKEN_LIFETIME = timedelta(hours=24)


@dataclass(frozen=True)
class UpPlan:
    """What to run; the CLI's options, checked."""

    host: str = "127.0.0.1"
    port: int = 8000
    replay: bool = True
    trace: str = "openb"
    fmt: str = "openb"
    speed: Speed = 3600.0
    limit: int | None = None
    quotas: Path | None = None  # None with a replay: the demo quota tree
    pricebook: Path | None = None  # None with a replay: the demo price book
    kubeconfig: Path | None = None
    kube_context: str | None = None
    dispatch: bool | None = None  # None: on with kubesim, off on a real cluster
    dispatch_interval: float = 10.0
    billing_interval: float = 60.0
    keep_services: bool = False  # leave the embedded database and broker it started running

    @property
    def on_kubesim(self) -> bool:
        return self.kubeconfig is None and self.replay

    @property
    def runs_dispatcher(self) -> bool:
        """On kubesim unless ``--no-dispatch``; on a real cluster only with ``--dispatch``;
        never without a cluster (``--no-replay``): there is nothing to act on."""
        if not self.on_kubesim and self.kubeconfig is None:
            return False
        return self.on_kubesim if self.dispatch is None else self.dispatch


@dataclass
class Running:
    """What ``up`` prints once every part serves."""

    base_url: str
    token: str
    token_id: str
    components: list[str]
    kubesim_url: str | None = None
    notes: list[str] = field(default_factory=list)
    token_expires: datetime | None = None

    def lines(self) -> list[str]:
        lines = [
            f"dlc-ledger up: running {', '.join(self.components)} (Ctrl-C stops them)",
            f"  dashboard: {self.base_url}/",
            f"  api:       {self.base_url}/v1 (OpenAPI: {self.base_url}/openapi.json)",
            f"  metrics:   {self.base_url}/metrics (every component's; an admin or metrics token)",
        ]
        if self.kubesim_url:
            lines.append(f"  kubesim:   {self.kubesim_url}")
        expires = (
            ""
            if self.token_expires is None
            else f"expires {format_timestamp(self.token_expires)}, "
        )
        lines += [
            f"  token:     {self.token}",
            f"             (admin, {TOKEN_NAME} {self.token_id}; {expires}revoked when up stops)",
            f'  try:       curl -H "Authorization: Bearer {self.token}" {self.base_url}/v1/whoami',
        ]
        return lines + [f"  note: {note}" for note in self.notes]


@dataclass(frozen=True)
class EmbeddedServices:
    """Which embedded services (``DATABASE_URL`` / ``KAFKA_BOOTSTRAP`` unset) were running
    before ``up`` began: :meth:`stop_started` ends only the others, those ``up`` started."""

    database: bool | None  # None: not embedded (configured), nothing of up's to stop
    broker: bool | None

    @classmethod
    def seen_now(cls) -> EmbeddedServices:
        from dlc_ledger.wiring.broker import EmbeddedBroker
        from dlc_ledger.wiring.embedded_postgres import embedded_running

        cfg = context.settings()
        database = None if cfg.database_url else embedded_running(cfg.data_dir)
        broker = (
            None
            if cfg.kafka_bootstrap
            else EmbeddedBroker(cfg.data_dir / "broker").status().running
        )
        return cls(database, broker)

    def stop_started(self, say: Callable[[str], None]) -> None:
        """Stop the embedded broker and database if they were not running before (the
        broker first: nothing of up uses either any more)."""
        from dlc_ledger.wiring.broker import EmbeddedBroker
        from dlc_ledger.wiring.embedded_postgres import embedded_running, stop_embedded

        cfg = context.settings()
        if self.broker is False:
            try:
                if EmbeddedBroker(cfg.data_dir / "broker").stop():
                    say("stopped the embedded broker up started")
            except Exception as exc:  # report, and still stop the database
                say(f"could not stop the embedded broker: {exc}")
        if self.database is False and embedded_running(cfg.data_dir):
            try:
                stop_embedded(cfg.data_dir)
                say("stopped the embedded PostgreSQL up started")
            except Exception as exc:
                say(f"could not stop the embedded PostgreSQL: {exc}")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _listen(host: str, port: int) -> socket.socket:
    """The API's socket, bound now: ``--port 0`` gets its port before the URL is printed,
    and a port in use is an error before anything else starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise Conflict(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _bootstrap() -> str:
    """The broker: the embedded one (started if needed) or ``KAFKA_BOOTSTRAP``, which must
    answer within 5 s (a typo fails fast, with the address; with SASL / TLS options the
    consumers' own errors tell)."""
    from dlc_ledger.wiring.broker import wait_for_kafka

    bootstrap = context.kafka_bootstrap()
    if context.settings().kafka_bootstrap and not context.settings().kafka_client_options():
        wait_for_kafka(bootstrap, timeout=5.0)
    return bootstrap


def _observed_clock(epoch: datetime) -> Callable[[PostgresEventStore], datetime]:
    """Billing's "now" on a replayed cluster: the latest cluster time the store has seen
    (the wall clock lies months away from a replay's history), the epoch before any."""
    from dlc_ledger.services.clocks import observed_cluster_time

    return lambda store: observed_cluster_time(store) or epoch


def _admin_token(store: PostgresEventStore) -> tuple[str, str, datetime | None]:
    """A new ``up-admin`` token (its secret, id and expiry); the earlier runs' ones revoked
    first."""
    from dlc_ledger.services.access import create_token, list_tokens, revoke

    for old in list_tokens(store):
        if old.name == TOKEN_NAME and old.revoked_at is None:
            revoke(store, old.token_id)
    created = create_token(
        store,
        ["admin"],
        name=TOKEN_NAME,
        created_by=context.local_principal(),
        expires_in=TOKEN_LIFETIME,
    )
    return created.secret, created.token.token_id, created.token.expires_at


def _migrate() -> None:
    """Bring the database up to date when it is behind, as the schema owner, on a
    connection closed before any part starts: the only thing ``up`` does as the owner."""
    from dlc_ledger.wiring.replay.database import upgrade_if_behind

    owner = context.open_store(create=True, check=False, role="owner")
    try:
        upgrade_if_behind(owner)
    finally:
        owner.close()


def _say_logins(store: PostgresEventStore, say: Callable[[str], None]) -> None:
    """Where every part connects as one login (``DATABASE_URL`` alone), say which, and
    whether it is a superuser."""
    note = context.login_note()
    if note is None:
        return
    with store.engine.connect() as conn:
        superuser = conn.execute(
            text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        ).scalar()
    say(note + (" — a superuser" if superuser else ""))


def _writer_url(component: str) -> str:
    return context.component_url("writer", component)


@dataclass
class _ClusterSide:
    """What the cluster side left for the rest: kubesim (if any), billing's clock, notes."""

    parts: ReplayParts = field(default_factory=ReplayParts)
    replaying: str = ""
    billing_clock: Callable[[PostgresEventStore], datetime] | None = None
    notes: list[str] = field(default_factory=list)


def _start_cluster_side(
    plan: UpPlan,
    store: PostgresEventStore,
    supervisor: Supervisor,
    say: Callable[[str], None],
) -> _ClusterSide:
    """kubesim replaying with its watcher and ingest; or the watchers and ingest on the
    kubeconfig's cluster; or (``--no-replay``) nothing: no broker either."""
    from dlc_ledger.wiring.kube import kube_configuration
    from dlc_ledger.wiring.replay import cluster_name, load_replay_trace
    from dlc_ledger.wiring.replay.database import replay_topic
    from kubesim.clock import DEFAULT_EPOCH

    cfg = context.settings()
    side = _ClusterSide()
    if plan.kubeconfig is not None:
        configuration = kube_configuration(None, plan.kubeconfig, plan.kube_context)
        bootstrap = _bootstrap()
        options = cfg.kafka_client_options()
        supervisor.start(ingest_component(_writer_url("ingest"), bootstrap, cfg.topic, options))
        supervisor.start(
            watcher_component(
                configuration,
                _writer_url("watcher"),
                bootstrap,
                cfg.topic,
                cfg.cluster,
                cfg.data_dir,
                options,
            )
        )
        return side  # billing on the wall clock, as `billing serve`
    if not plan.replay:
        side.billing_clock = _observed_clock(DEFAULT_EPOCH)
        side.notes.append("--no-replay: serving the stored data (no cluster, no ingest)")
        return side
    trace = load_replay_trace(plan.trace, plan.fmt, limit=plan.limit)
    pace = "as fast as ingest keeps up" if plan.speed == "max" else f"{plan.speed:g}x"
    side.replaying = f"replaying {trace.name}, {len(trace.instances):,} pods, {pace}"
    bootstrap = _bootstrap()
    topic = replay_topic(store, bootstrap, cfg.partitions)
    _apply_reference_data(plan, store, trace.epoch, say)
    supervisor.start(
        replay_component(
            trace,
            _writer_url("ingest"),  # the replay's watcher and ingest, one store
            bootstrap,
            topic,
            cfg.partitions,
            cfg.data_dir,
            plan.speed,
            cluster_name(trace),  # as `replay` names it: the same cluster's facts
            say,
            side.parts,
        )
    )
    side.billing_clock = _observed_clock(trace.epoch)
    return side


def _apply_reference_data(
    plan: UpPlan, store: PostgresEventStore, epoch: datetime, say: Callable[[str], None]
) -> None:
    """The price book and quota tree (the demo's unless given; for the combined replay the
    tree that binds DLRM's apps too) at the trace's start."""
    from importlib.resources import as_file

    from dlc_ledger.resources import COMBINED_QUOTAS, DEMO_PRICE_BOOK, DEMO_QUOTAS
    from dlc_ledger.wiring.replay import COMBINED
    from dlc_ledger.wiring.replay.reference_data import apply_reference_data

    tree = COMBINED_QUOTAS if plan.fmt == COMBINED else DEMO_QUOTAS
    with as_file(tree) as demo_quotas, as_file(DEMO_PRICE_BOOK) as demo_prices:
        apply_reference_data(
            store, plan.quotas or demo_quotas, plan.pricebook or demo_prices, epoch, say
        )


def _start_dispatcher(plan: UpPlan, parts: ReplayParts, supervisor: Supervisor) -> None:
    """The dispatcher on kubesim (its URL and virtual clock) or on the kubeconfig's cluster
    (the wall clock)."""
    from dlc_ledger.wiring.kube import kube_configuration

    def configuration() -> client.Configuration:
        if parts.sim is not None:
            return kube_configuration(parts.sim.url)
        return kube_configuration(None, plan.kubeconfig, plan.kube_context)

    def sim_clock() -> Callable[[], datetime]:
        assert parts.sim is not None
        return parts.sim.clock.now

    supervisor.start(
        dispatcher_component(
            _writer_url("dispatcher"),
            configuration,
            sim_clock if parts.sim is not None else None,
            plan.dispatch_interval,
        )
    )


def run_up(
    plan: UpPlan,
    stop: threading.Event,
    on_ready: Callable[[Running], None],
    say: Callable[[str], None] = _stderr,
) -> None:
    """Run every part until ``stop`` is set (a signal); raises
    :class:`~dlc_ledger.wiring.supervisor.ComponentFailed` when one fails."""
    before = EmbeddedServices.seen_now()  # what runs already is not up's to stop
    listener = _listen(plan.host, plan.port)
    store: PostgresEventStore | None = None
    supervisor = Supervisor(stop)
    token_id: str | None = None
    if plan.replay and context.run_choice is None and context.settings().run is None:
        # a live replay plays open loop: into the configured database, whichever run the
        # last demo left in use (dlc_ledger.wiring.runs)
        context.run_choice = OPEN_LOOP
    try:
        # like replay (a dev tool), up brings a database that is behind up to date
        _migrate()
        # up's own work (reference data, the topic's record, its token) is a writer's
        store = PostgresEventStore(_writer_url("up"))
        _say_logins(store, say)
        side = _start_cluster_side(plan, store, supervisor, say)
        label = context.run_label(context.base_database_url(announce=False))
        if label is not None:
            side.notes.append(f"serving run {label} (dlc-ledger runs lists the others)")
        supervisor.start(projector_component(_writer_url("projector")))
        supervisor.start(
            billing_component(
                _writer_url("billing"),
                timedelta(seconds=plan.billing_interval),
                side.billing_clock,
            )
        )
        supervisor.start(notifications_component(_writer_url("notifications"), side.billing_clock))
        if plan.runs_dispatcher:
            _start_dispatcher(plan, side.parts, supervisor)
        elif plan.dispatch:
            side.notes.append("--dispatch ignored: --no-replay has no cluster to act on")
        supervisor.start(api_component(listener))  # its store: context.open_api_store
        secret, token_id, expires = _admin_token(store)
        sim = side.parts.sim
        on_ready(
            Running(
                base_url=_url(listener),
                token=secret,
                token_id=token_id,
                components=[c.name for c in supervisor.components],
                kubesim_url=None if sim is None else f"{sim.url} ({side.replaying})",
                notes=side.notes,
                token_expires=expires,
            )
        )
        supervisor.wait()
    finally:
        stuck = supervisor.shutdown()
        if stuck:
            say(f"did not stop within {supervisor.join_timeout:.0f} s: {', '.join(stuck)}")
        listener.close()
        if store is not None:
            if token_id is not None:
                from dlc_ledger.services.access import revoke

                try:
                    revoke(store, token_id)
                except Exception as exc:  # the database gone: the next run revokes it
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc
                    say(f"could not revoke {TOKEN_NAME} {token_id}: {first}")
            store.close()
        if not plan.keep_services:
            before.stop_started(say)
