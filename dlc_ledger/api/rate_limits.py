"""Per-token rate limits: a token bucket per principal, so one careless client (a
dashboard left polling, a script in a loop) cannot take the API's workers from everyone.

Each principal (its ``token_id``: a ``dlct_`` token's id, an OIDC subject's ``oidc:<sub>``)
may make ``burst`` requests at once and ``rate`` per second after that; a request over the
limit is refused with 429 and ``Retry-After`` (whole seconds until one more would pass).
The buckets live in the API process: with several worker processes each counts its own
(docs/api.md, "Limits"). Applied in :func:`dlc_ledger.api.auth.current_principal`, once the
principal is known: a request without a valid token is a 401 before it costs a bucket
anything.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from ledger.errors import Invalid

__all__ = ["RateLimiter", "rate_limiter"]


class RateLimiter:
    """Token buckets by key: ``rate`` tokens a second, at most ``burst`` held; ``clock``
    (seconds, monotonic) is injected so tests move time instead of sleeping."""

    def __init__(
        self, rate: float, burst: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not (rate > 0 and math.isfinite(rate)) or burst < 1:
            raise Invalid(f"a rate limit needs a rate > 0 and a burst >= 1, got {rate}, {burst}")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, when counted)
        # a sync dependency runs on the thread pool: requests take from the buckets at once
        self._lock = threading.Lock()
        self._swept = clock()

    def take(self, key: str) -> int | None:
        """Spend one token of ``key``'s bucket: None when there was one (the request
        passes), else the whole seconds (at least 1) until there is."""
        with self._lock:
            now = self._clock()
            self._sweep(now)
            tokens = self._tokens(key, now)
            if tokens >= 1:
                self._buckets[key] = (tokens - 1, now)
                return None
            self._buckets[key] = (tokens, now)
            return max(1, math.ceil((1 - tokens) / self.rate))

    def _tokens(self, key: str, now: float) -> float:
        held, counted = self._buckets.get(key, (self.burst, now))
        return min(float(self.burst), held + max(0.0, now - counted) * self.rate)

    def _sweep(self, now: float) -> None:
        # a full bucket is the same as none: forget those once per refill time, so the
        # table holds only the principals seen recently (OIDC subjects are unbounded)
        if now - self._swept < self.burst / self.rate:
            return
        self._swept = now
        full = [key for key in self._buckets if self._tokens(key, now) >= self.burst]
        for key in full:
            del self._buckets[key]

    def __len__(self) -> int:
        return len(self._buckets)


def rate_limiter(rate: float, burst: int) -> RateLimiter | None:
    """The limiter ``DLC_API_RATE`` and ``DLC_API_BURST`` ask for; None when the rate is 0
    (no limit)."""
    return None if rate == 0 else RateLimiter(rate, burst)
