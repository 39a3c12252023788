"""One run of the chaos replay: its own database, broker, cluster and components, start to end.

The order: a private PostgreSQL (``db upgrade``, then the demo's price book, subscription
plan and quota tree at the trace's epoch, as ``replay`` applies them), Tansu behind its
proxy, kubesim with the slice's nodes, then every component as its production command under
the supervisor; once the watcher's node facts are stored the replay starts (and, in the
chaos run, the faults). At the end the run waits until the pipeline is quiet, runs one
``billing run`` to the horizon as a command, waits for the projector, stops the
components and reads what it is compared by: the stored cluster facts and every report.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.resources import as_file
from pathlib import Path
from typing import Any

import psycopg

from chaos.broker import ProxiedBroker
from chaos.cluster import WATCHES, Replay, Slice
from chaos.faults import (
    COMPONENTS,
    HOLD_TIMEOUT,
    RECOVERY_TIMEOUT,
    Fault,
    Injector,
    KubeKnobs,
    plan_faults,
)
from chaos.lockstep import LockstepReplay
from chaos.postgres import PrivateServer
from chaos.processes import Process, Supervisor
from chaos.webhooks import RULES, SECRET, WebhookReceiver
from dlc_ledger.wiring.broker import free_port
from ledger.canonical import format_timestamp

__all__ = ["RunResult", "run_once"]

CLUSTER = "replay-openb"
TOPIC = "dlc.cluster-events"
PARTITIONS = 4
QUIET_SECONDS = 6.0  # the store head unchanged this long (with everything else idle): done
#: a closed loop's tree: tighter than the demo's, so that jobs queue and are preempted
CLOSED_LOOP_QUOTAS = Path(__file__).with_name("closed-loop-quotas.yaml")
STEP_QUIET_SECONDS = 0.8  # the same between two instants of a closed loop
END_TIMEOUT = 300.0


@dataclass
class RunResult:
    name: str
    facts: list[tuple[str, str, str, str]]  # (type, stream, occurred_at, canonical data)
    reports: dict[str, dict[str, Any]]
    faults: list[Fault] = field(default_factory=list)
    deliveries: list[tuple[str, str, str]] = field(default_factory=list)
    restarts: dict[str, int] = field(default_factory=dict)
    wall_seconds: float = 0.0
    replay_seconds: float = 0.0
    events: int = 0
    cycles: int = 0  # closed loop: the instants the dispatcher cycled at


class _Monitor:
    """The store's head and the projector's position, read every 0.5 s over a connection
    of its own (reopened after a fault)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.head = 0
        self.projected = 0
        self.changed_at = time.monotonic()
        self.up = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="chaos-monitor", daemon=True)

    def start(self) -> _Monitor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _poll(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        while not self._stop.wait(0.5):
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.url, autocommit=True, connect_timeout=3)
                head = conn.execute("SELECT coalesce(max(position), 0) FROM events").fetchone()
                projected = conn.execute(
                    "SELECT coalesce(min(position), 0) FROM checkpoints "
                    "WHERE name LIKE 'projection:%'"
                ).fetchone()
                self.up = True
            except psycopg.Error:
                self.up = False
                if conn is not None:
                    with contextlib.suppress(psycopg.Error):
                        conn.close()
                conn = None
                continue
            value = int(head[0]) if head else 0
            if value != self.head:
                self.head, self.changed_at = value, time.monotonic()
            self.projected = int(projected[0]) if projected else 0
        if conn is not None:
            conn.close()


class _Run:
    """The parts of one run, as the fault injector sees them (:class:`chaos.faults.Target`)."""

    def __init__(self, name: str, root: Path, chosen: Slice, speed: float,
                 say: Callable[[str], None], *, closed_loop: bool = False,
                 wall_estimate: float = 0.0) -> None:  # fmt: skip
        self.name = name
        self.root = root
        self.slice = chosen
        self.speed = speed
        self.say = say
        self.closed_loop = closed_loop
        self.wall_estimate = wall_estimate
        # a closed loop delays jobs: it may run past the slice's horizon, as far again
        self.horizon = chosen.horizon + (chosen.horizon - chosen.start if closed_loop else 0)
        self._dispatch_log_offset = 0
        (root / "logs").mkdir(parents=True, exist_ok=True)
        (root / "data").mkdir(parents=True, exist_ok=True)
        self.pg = PrivateServer(root / "postgres")
        self.broker = ProxiedBroker(root / "logs" / "tansu.log", TOPIC, PARTITIONS)
        self.supervisor = Supervisor(root / "logs")
        self.webhooks = WebhookReceiver()
        self.replay: Replay | LockstepReplay | None = None
        self.monitor: _Monitor | None = None
        self.api_port = 0

    # -- chaos.faults.Target ---------------------------------------------------------------

    def store_head(self) -> int:
        return 0 if self.monitor is None else self.monitor.head

    def database_up(self) -> bool:
        return self.pg.wait_ready(timeout=1.0)

    def pg_restart(self, mode: str) -> None:
        self.pg.restart(mode)

    def pg_terminate(self, application_like: str) -> int:
        return self.pg.terminate(application_like)

    def broker_cut(self) -> int:
        assert self.broker.proxy is not None
        return self.broker.proxy.cut()

    def broker_restore(self) -> None:
        assert self.broker.proxy is not None
        self.broker.proxy.restore()

    def broker_accepted(self) -> int:
        assert self.broker.proxy is not None
        return self.broker.proxy.accepted

    def broker_reconnected_since(self, mark: int) -> bool:
        assert self.broker.proxy is not None
        return not self.broker.proxy.is_cut and self.broker.proxy.accepted > mark

    def kube(self) -> KubeKnobs:
        assert self.replay is not None
        return self.replay.sim

    def watches_open(self) -> int:
        assert self.replay is not None
        return self.replay.sim.watch_count()

    def component(self, name: str) -> Process:
        return self.supervisor.processes[name]

    def cluster_revision(self) -> int:
        assert self.replay is not None
        return self.replay.sim.store.resource_version

    def hold_cluster(self) -> tuple[list[object], int]:
        """Stop cluster time; the open watches and kubesim's request count, as marks."""
        assert self.replay is not None
        self.replay.hold()
        return self.replay.watches(), len(self.replay.sim.requests)

    def release_cluster(self) -> None:
        assert self.replay is not None
        self.replay.release()

    def watch_backlog(self) -> int:
        assert self.replay is not None
        return self.replay.sim.watch_backlog()

    def watches(self) -> list[object]:
        assert self.replay is not None
        return self.replay.watches()

    def lists_since(self, mark: int) -> int:
        assert self.replay is not None
        return self.replay.lists_since(mark)

    def replay_done(self) -> bool:
        return self.replay is not None and self.replay.done.is_set()

    # -- the run ---------------------------------------------------------------------------

    def env(self, component: str) -> dict[str, str]:
        env = {
            k: v for k, v in os.environ.items()
            if not k.startswith(("DATABASE_URL", "KAFKA_", "DLC_"))
        }  # fmt: skip
        env.update(
            DATABASE_URL=self.pg.url(application=f"chaos-{component}"),
            KAFKA_BOOTSTRAP=self.broker.bootstrap,
            DLC_DATA_DIR=str(self.root / "data"),
            DLC_TOPIC=TOPIC,
            DLC_PARTITIONS=str(PARTITIONS),
            CHAOS_HOOK_SECRET=SECRET,
            DLC_WEBHOOK_ALLOW="127.0.0.1",  # the run's receiver is on loopback
            PYTHONUNBUFFERED="1",
        )
        return env

    def command(self, *args: str, timeout: float = 300) -> str:
        """``dlc-ledger ARGS`` once, as a command (its output; a failure raises)."""
        done = subprocess.run(
            [sys.executable, "-m", "dlc_ledger", *args],
            env=self.env("command"), capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"dlc-ledger {' '.join(args)} exited {done.returncode}: "
                               f"{done.stderr.strip()[-2000:]}")  # fmt: skip
        return done.stdout

    def prepare(self) -> None:
        self.pg.start()
        self.broker.start()
        self.command("db", "upgrade")
        self._reference_data()
        self.webhooks.start()
        rules = self.root / "notification-rules.yaml"
        rules.write_text(RULES.format(url=self.webhooks.url))
        epoch = format_timestamp(self.slice.trace.epoch)
        self.command("notifications", "secrets", "grant", "*", "CHAOS_HOOK_SECRET")
        self.command("notifications", "apply", str(rules), "--effective-at", epoch)
        if self.closed_loop:
            self.replay = LockstepReplay(
                self.slice, self.settle_step, self.dispatcher_cycled,
                wall_estimate=self.wall_estimate, horizon=self.horizon,
            )  # fmt: skip
        else:
            self.replay = Replay(self.slice, self.speed)
        self.monitor = _Monitor(self.pg.url(application="chaos-monitor")).start()

    def _reference_data(self) -> None:
        """The demo's price book, subscriptions and quota tree at the trace's epoch, as
        ``replay`` (and ``demo``) apply them."""
        from dlc_ledger.resources import DEMO_PRICE_BOOK, DEMO_QUOTAS, DEMO_SUBSCRIPTIONS
        from dlc_ledger.wiring.replay.reference_data import apply_reference_data
        from ledger.store.postgres import PostgresEventStore

        store = PostgresEventStore(self.pg.url(application="chaos-reference-data"))
        try:
            with (
                as_file(DEMO_QUOTAS) as demo_quotas,
                as_file(DEMO_PRICE_BOOK) as pricebook,
                as_file(DEMO_SUBSCRIPTIONS) as plan,
            ):
                quotas = CLOSED_LOOP_QUOTAS if self.closed_loop else demo_quotas
                apply_reference_data(store, quotas, pricebook, self.slice.trace.epoch,
                                     lambda _line: None, subscriptions=plan)  # fmt: skip
        finally:
            store.close()

    def start_components(self) -> None:
        assert self.replay is not None
        self.api_port = free_port()
        commands = {
            "watch": ["watch", "--server", self.replay.url, "--cluster", CLUSTER],
            "ingest-a": ["ingest"],
            "ingest-b": ["ingest"],
            "project": ["project", "--follow", "--poll-interval", "0.5"],
            "billing": ["billing", "serve", "--interval-seconds", "3", "--clock", "cluster"],
            "notifications": ["notifications", "send", "--interval", "1"],
            "api": ["api", "serve", "--workers", "1", "--port", str(self.api_port)],
        }
        if self.closed_loop:
            commands["dispatch"] = [
                "dispatch", "--follow", "--interval", "0.1", "--no-project",
                "--server", self.replay.url, "--clock", "server",
            ]  # fmt: skip
        self.supervisor.start()
        for name, args in commands.items():
            self.supervisor.add(Process(name, args, self.env(name)))

    def wait_for_nodes(self, timeout: float = 180.0) -> None:
        """Until the watcher's node facts are stored: the pipeline works end to end."""
        nodes = len(self.slice.trace.nodes)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._count("SELECT count(*) FROM events WHERE stream LIKE 'node/%'") >= nodes:
                return
            self._check_alive()
            time.sleep(0.5)
        raise RuntimeError(f"{self.name}: the node facts were not stored within {timeout:.0f} s"
                           f" (see {self.root / 'logs'})")  # fmt: skip

    def _check_alive(self) -> None:
        for process in list(self.supervisor.processes.values()):
            if self.supervisor.crash_looping(process.name):
                log = self.root / "logs" / f"{process.name}.log"
                tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
                raise RuntimeError(f"{self.name}: {process.name} keeps dying:\n{tail}")

    def _count(self, query: str) -> int:
        with contextlib.suppress(psycopg.Error), psycopg.connect(self.pg.url()) as conn:
            row = conn.execute(query).fetchone()
            return int(row[0]) if row else 0
        return 0

    def spool_pending(self) -> int:
        path = self.root / "data" / "watcher" / CLUSTER / "producer-spool.sqlite3"
        if not path.exists():
            return 0
        try:
            with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
                row = db.execute("SELECT count(*) FROM spool").fetchone()
        except sqlite3.Error:
            return -1  # busy: not known to be empty
        return int(row[0]) if row else 0

    def ingest_caught_up(self) -> bool:
        """Whether the ingest group's stored offsets (the ``ingest:<group>`` checkpoint,
        written with the events) reach every partition's end. Tansu reports a partition's
        end as the last batch's base offset + 1 (DESIGN §2), so this is necessary, not
        sufficient: the store head standing still for a while does the rest. A head that
        stands still alone is not enough: after a broker cut the group may take longer
        than that to come back (a dead member's partitions wait for its session timeout)."""
        from kafka import KafkaConsumer, TopicPartition
        from kafka.errors import KafkaConfigurationError, KafkaError

        from consumers.kafka_settings import DEFAULT_GROUP, checkpoint_name, offsets_key

        partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        try:
            consumer = KafkaConsumer(
                bootstrap_servers=self.broker.bootstrap, client_id="chaos-end-offsets",
                request_timeout_ms=5000,
            )  # fmt: skip
        except KafkaConfigurationError:
            raise  # ours, not the broker's: never taken for "not caught up"
        except (KafkaError, OSError):
            return False
        try:
            ends = consumer.end_offsets(partitions)
        except (KafkaError, OSError):
            return False
        finally:
            consumer.close()
        try:
            with psycopg.connect(self.pg.url(), connect_timeout=3) as conn:
                row = conn.execute(
                    "SELECT offsets FROM checkpoints WHERE name = %s",
                    (checkpoint_name(DEFAULT_GROUP),),
                ).fetchone()
        except psycopg.Error:
            return False
        stored = row[0] if row else {}
        return all(
            int(stored.get(offsets_key(tp.topic, tp.partition), 0)) >= int(end)
            for tp, end in ends.items()
        )

    def _drained(self, *, up_for: float, stalled: bool) -> bool:
        """Every component up for ``up_for`` s, every watch open with nothing queued (with
        ``stalled``, what a stalled watch holds counts too), the watcher's spool empty and
        the ingest group at every partition's end (the costly check, last)."""
        assert self.replay is not None
        sim = self.replay.sim
        return (
            self.supervisor.all_up(for_seconds=up_for)
            and sim.watch_count() >= WATCHES
            and sim.watch_backlog(stalled=stalled) == 0
            and self.spool_pending() == 0
            and self.ingest_caught_up()
        )

    def wait_quiet(self, what: str) -> None:
        """Until the pipeline has nothing left to do: every component up, kubesim's watches
        open and drained, the watcher's spool empty, the ingest group at every partition's
        end, the store head unchanged for :data:`QUIET_SECONDS` and projected to its
        head."""
        assert self.monitor is not None
        deadline = time.monotonic() + END_TIMEOUT
        while time.monotonic() < deadline:
            idle = (
                self.monitor.up
                and time.monotonic() - self.monitor.changed_at >= QUIET_SECONDS
                and self.monitor.projected >= self.monitor.head
                and self._drained(up_for=2.0, stalled=False)
            )
            if idle:
                return
            self._check_alive()
            time.sleep(0.5)
        raise RuntimeError(f"{self.name}: not quiet {what} within {END_TIMEOUT:.0f} s")

    @property
    def components(self) -> tuple[str, ...]:
        return (*COMPONENTS, "dispatch") if self.closed_loop else COMPONENTS

    def _positions(self) -> tuple[int, int] | None:
        """(the last cluster fact's position, the least projected position), None while the
        database is away. Cluster facts only: billing's postings and the notifications'
        events come on their own clocks and decide nothing the dispatcher reads."""
        try:
            with psycopg.connect(self.pg.url(application="chaos-lockstep"),
                                 connect_timeout=3) as conn:  # fmt: skip
                row = conn.execute(
                    "SELECT (SELECT coalesce(max(position), 0) FROM events "
                    "WHERE stream LIKE 'job/%' OR stream LIKE 'node/%'), "
                    "(SELECT coalesce(min(position), 0) FROM checkpoints "
                    "WHERE name LIKE 'projection:%')"
                ).fetchone()
        except psycopg.Error:
            return None
        return (int(row[0]), int(row[1])) if row else None

    def settle_step(self) -> None:
        """Closed loop: until everything kubesim wrote is watched, published, stored and
        projected (the conditions of :meth:`wait_quiet`, with the last cluster fact's
        position still for :data:`STEP_QUIET_SECONDS`)."""
        deadline = time.monotonic() + END_TIMEOUT
        head, since = -1, time.monotonic()
        while time.monotonic() < deadline:
            positions = self._positions()
            now = time.monotonic()
            if positions is None or positions[0] != head:
                head, since = (-1 if positions is None else positions[0]), now
            elif (
                positions[1] >= head
                and now - since >= STEP_QUIET_SECONDS
                and self._drained(up_for=1.0, stalled=True)  # what a stalled watch holds too
            ):
                return
            self._check_alive()
            time.sleep(0.1)
        raise RuntimeError(f"{self.name}: the pipeline did not settle within {END_TIMEOUT:.0f} s")

    def dispatcher_cycled(self, second: float) -> None:
        """Closed loop: until the dispatcher printed a cycle at trace second ``second``
        without failures (its log, read on from where the last call stopped)."""
        stamp = f"cycle at {self.slice.at(second).isoformat()},"
        path = self.root / "logs" / "dispatch.log"
        deadline = time.monotonic() + END_TIMEOUT
        while time.monotonic() < deadline:
            if path.exists():
                with path.open("rb") as log:
                    log.seek(self._dispatch_log_offset)
                    chunk = log.read()
                end = chunk.rfind(b"\n") + 1  # whole lines only
                self._dispatch_log_offset += end
                for line in chunk[:end].decode(errors="replace").splitlines():
                    if line.startswith(stamp) and " failed " not in line:
                        return
            self._check_alive()
            time.sleep(0.05)
        raise RuntimeError(f"{self.name}: no dispatcher cycle at {stamp[9:-1]} within "
                           f"{END_TIMEOUT:.0f} s (see {path})")  # fmt: skip

    def facts(self) -> list[tuple[str, str, str, str]]:
        """The cluster facts (job and node streams): what a watcher observed, without what
        differs between two observations of one fact (ids, observed_at, recorded_at); and
        the dispatcher's decisions (``dispatch/`` streams: a closed loop's admissions and
        preemptions, at the instants decided)."""
        with psycopg.connect(self.pg.url()) as conn:
            rows = conn.execute(
                "SELECT type, stream, occurred_at, data FROM events "
                "WHERE stream LIKE 'job/%' OR stream LIKE 'node/%' OR stream LIKE 'dispatch/%'"
            ).fetchall()
        return sorted(
            (str(t), str(s), format_timestamp(o), json.dumps(d, sort_keys=True))
            for t, s, o, d in rows
        )

    def reports(self) -> dict[str, dict[str, Any]]:
        out = self.root / "reports.json"
        start, end = self.slice.at(self.slice.start), self.slice.at(self.horizon)
        done = subprocess.run(
            [sys.executable, "-m", "chaos.reports", str(out), start.isoformat(), end.isoformat()],
            env=self.env("reports"), capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"{self.name}: reports failed: {done.stderr[-2000:]}")
        loaded: dict[str, dict[str, Any]] = json.loads(out.read_text())
        return loaded

    def close(self) -> None:
        self.supervisor.stop_all()
        if self.monitor is not None:
            self.monitor.stop()
        if self.replay is not None:
            self.replay.stop()
        self.broker.stop()
        self.webhooks.stop()
        self.pg.stop()


def run_once(
    name: str,
    root: Path,
    chosen: Slice,
    speed: float,
    *,
    seed: int,
    faults: int,
    say: Callable[[str], None],
    closed_loop: bool = False,
    wall_estimate: float = 0.0,
) -> RunResult:
    """Run the slice once (with ``faults`` faults drawn from ``seed``) and read the result.
    ``closed_loop``: jobs admitted by the dispatcher in lockstep (:mod:`chaos.lockstep`),
    faults planned over ``wall_estimate`` seconds."""
    started = time.monotonic()
    run = _Run(name, root, chosen, speed, say, closed_loop=closed_loop,
               wall_estimate=wall_estimate)  # fmt: skip
    stop = threading.Event()  # ends the injector early when the run fails
    try:
        run.prepare()
        run.start_components()
        run.wait_for_nodes()
        assert run.replay is not None
        plan = plan_faults(
            random.Random(seed), faults, run.replay.wall_seconds, run.components,
            first_kill="dispatch" if closed_loop else None,
        )  # fmt: skip
        injector = Injector(run, plan, say)
        say(f"{name}: replaying {chosen.pods} pods over {run.replay.wall_seconds:.0f} s"
            + (f" with {faults} faults" if faults else ""))  # fmt: skip
        run.replay.go()
        thread = threading.Thread(
            target=injector.run, args=(run.replay.started_at, stop), daemon=True
        )
        thread.start()
        run.replay.done.wait()
        replay_seconds = run.replay.elapsed()
        cycles = 0
        if isinstance(run.replay, LockstepReplay):
            if run.replay.error is not None:
                raise run.replay.error
            cycles = run.replay.cycles
            say(f"{name}: closed loop done in {replay_seconds:.0f} s, {cycles} cycles")
        thread.join()
        injector.join(timeout=HOLD_TIMEOUT + RECOVERY_TIMEOUT)
        run.wait_quiet("after the replay")
        until = format_timestamp(chosen.at(run.horizon))
        say(f"{name}: quiet at store position {run.store_head()}; billing run --until {until}")
        run.command("billing", "run", "--until", until, "--force")
        run.wait_quiet("after the billing run")
        facts = run.facts()
        (root / "facts.json").write_text(json.dumps(facts, indent=0))
        restarts = run.supervisor.restarts()
        run.supervisor.stop_all()
        deliveries = run.webhooks.received
        (root / "deliveries.json").write_text(json.dumps(deliveries, indent=0))
        reports = run.reports()
        return RunResult(
            name, facts, reports, plan, deliveries, restarts,
            wall_seconds=round(time.monotonic() - started, 1),
            replay_seconds=round(replay_seconds, 1), events=run.store_head(), cycles=cycles,
        )  # fmt: skip
    finally:
        stop.set()
        run.close()
