"""Where the dispatcher's "now" comes from when the host's clock is not the cluster's.

Beside a replayed or simulated cluster (kubesim), decisions must be stamped and timed at
the cluster's time. An API server tells its time in every answer's ``Date`` header (RFC
9110, whole seconds); :func:`api_server_clock` reads it with one ``GET /version``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from ledger.errors import Unavailable

__all__ = ["api_server_clock"]


def api_server_clock(api: client.ApiClient) -> Callable[[], datetime]:
    """A clock reading the API server's ``Date``; raises :class:`Unavailable` when the
    server cannot be asked or sends no date."""
    version = client.VersionApi(api)

    def now() -> datetime:
        try:
            _, _, headers = version.get_code_with_http_info()
        except ApiException as exc:
            headers = exc.headers  # an error answer carries the server's time as well
            if not headers:
                raise Unavailable(f"the API server's clock could not be read: {exc}") from exc
        except (HTTPError, OSError) as exc:
            raise Unavailable(f"the API server's clock could not be read: {exc}") from exc
        date = headers.get("Date") if headers is not None else None
        if not date:
            raise Unavailable("the API server's answer carries no Date header")
        try:
            return parsedate_to_datetime(date).astimezone(UTC)
        except (TypeError, ValueError) as exc:
            raise Unavailable(f"the API server's Date header is not a date: {date!r}") from exc

    return now
