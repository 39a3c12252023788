"""The run's own Tansu broker, reached only through the cuttable proxy.

Tansu advertises the address clients are to use in its metadata answers; here that is the
proxy's, so after bootstrapping every client still talks through it, and cutting the proxy
takes the broker away from all of them at once. Tansu keeps its log in memory: it is never
restarted during a run (its topic would come back empty), only cut off.
"""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

from chaos.proxy import TcpProxy
from consumers.topics import ensure_topic
from dlc_ledger.wiring.broker import free_port, tansu_binary, wait_for_kafka

__all__ = ["ProxiedBroker"]


class ProxiedBroker:
    """Tansu on a free port behind a :class:`~chaos.proxy.TcpProxy`; ``bootstrap`` is the
    proxy's address."""

    def __init__(self, log_path: Path, topic: str, partitions: int) -> None:
        self.log_path = log_path
        self.topic = topic
        self.partitions = partitions
        self.proc: subprocess.Popen[bytes] | None = None
        self.proxy: TcpProxy | None = None

    @property
    def bootstrap(self) -> str:
        assert self.proxy is not None
        return self.proxy.address

    def start(self) -> ProxiedBroker:
        port = free_port()
        self.proxy = TcpProxy(("127.0.0.1", port)).start()
        argv = [
            tansu_binary(),
            "broker",
            "--listener-url",
            f"tcp://127.0.0.1:{port}",
            "--advertised-listener-url",
            f"tcp://{self.proxy.address}",
            "--storage-engine",
            "memory://tansu/",
        ]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        wait_for_kafka(self.bootstrap, timeout=30)
        ensure_topic(self.bootstrap, self.topic, partitions=self.partitions)
        return self

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(10)
