"""A webhook receiver on loopback: what the run's notification rule delivers to.

It records every notification delivered (the ``webhook-id`` header, the body's type and
data; each notification a storm's ``notifications.summary`` holds, by its own id) and answers
204; it checks nothing else (the signature is the notifier's own tests' business). At the
end, the deliveries of the two runs are compared as sets: every notification of the clean
run delivered at least once in the chaos run, none missing and none extra (a retry after a
fault may deliver one twice: at least once is the promise).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["RULES", "WebhookReceiver"]

#: the rule file applied in both runs (``{url}`` filled in): every job's end, every
#: workspace
RULES = """\
rules:
  - name: chaos-job-ends
    workspace: '*'
    events: [JobSucceeded, JobFailed, JobStopped]
    target:
      webhook: {url}
      secret_env: CHAOS_HOOK_SECRET
"""

#: the type of the one message a storm of notifications becomes
SUMMARY = "notifications.summary"

#: a Standard Webhooks secret (base64 after ``whsec_``): the receiver does not verify it
SECRET = "whsec_Y2hhb3MtcmVwbGF5LXdlYmhvb2stc2VjcmV0"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        try:
            document: Any = json.loads(body)
        except ValueError:
            document = {"unparsed": body.decode(errors="replace")}
        webhook_id = self.headers.get("webhook-id") or ""
        data = document.get("data") if isinstance(document, dict) else None
        if isinstance(document, dict) and document.get("type") == SUMMARY and data:
            # a storm's summary (more than 20 due at once for one target: after an
            # outage, say) delivers each notification it holds (docs/notifications.md)
            items = [
                (str(n.get("id")), str(n.get("type")), json.dumps(n.get("data"), sort_keys=True))
                for n in data.get("notifications", [])
            ]
        else:
            items = [(webhook_id, str(document.get("type")), json.dumps(data, sort_keys=True))]
        with self.server.lock:
            self.server.received.extend(items)
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.received: list[tuple[str, str, str]] = []


class WebhookReceiver:
    """``url`` to put in the rule; ``received``: (webhook-id, type, canonical data) of
    every delivery, in arrival order."""

    def __init__(self) -> None:
        self._server = _Server()
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="chaos-webhooks", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    @property
    def received(self) -> list[tuple[str, str, str]]:
        with self._server.lock:
            return list(self._server.received)

    def start(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
