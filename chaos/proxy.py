"""A loopback TCP proxy that can be cut: how the chaos replay takes the broker away.

Every component reaches Kafka through it (the broker advertises the proxy's address, so no
client ever learns the broker's own port). :meth:`TcpProxy.cut` resets every open
connection and refuses new ones until :meth:`TcpProxy.restore`: what a client sees when a
broker dies or the network between them goes, without touching the broker's state.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading

__all__ = ["TcpProxy"]

log = logging.getLogger(__name__)

_CHUNK = 65536


def _reset(sock: socket.socket) -> None:
    """Close with RST (linger 0), as a dead peer's kernel answers, waking both pumps."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target``, one pair of pump threads per connection."""

    def __init__(self, target: tuple[str, int], port: int = 0) -> None:
        self.target = target
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", port))
        self._listener.listen(128)
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cuts = 0  # overlapping cuts: restored when the last one ends
        self._closed = False
        self.accepted = 0
        self.refused = 0
        self._thread = threading.Thread(target=self._accept, name="chaos-proxy", daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def is_cut(self) -> bool:
        return self._cuts > 0

    def start(self) -> TcpProxy:
        self._thread.start()
        return self

    def cut(self) -> int:
        """Reset every open connection and refuse new ones until :meth:`restore`; the number
        of connections reset."""
        with self._lock:
            self._cuts += 1
            victims = list(self._open)
            self._open.clear()
        for sock in victims:
            _reset(sock)
        return len(victims)

    def restore(self) -> None:
        """End one :meth:`cut`; connections are accepted again once every cut has ended."""
        with self._lock:
            self._cuts = max(0, self._cuts - 1)

    def close(self) -> None:
        self._closed = True
        _reset(self._listener)
        with self._lock:
            victims = list(self._open)
            self._open.clear()
        for sock in victims:
            _reset(sock)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.is_cut:
                self.refused += 1
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _reset(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._cuts:  # cut while connecting
                    _reset(client)
                    _reset(upstream)
                    continue
                self._open.update((client, upstream))
                self.accepted += 1
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._pump, args=(source, sink), name="chaos-proxy-pump", daemon=True
                ).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(_CHUNK)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(source)
                self._open.discard(sink)
            # one side ended: end the other (a half-open Kafka connection is of no use)
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                source.close()
