"""Fixtures of the metrics tests: this process's ``/metrics`` served on a free port
(the same :func:`~consumers.metrics.serve_metrics` every long-running command calls),
scraped over HTTP and parsed with ``prometheus_client``'s own parser."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from consumers.metrics import serve_metrics

__all__ = ["Scrape", "free_port", "scrape"]

#: (family name, labels as sorted pairs) -> value, for every sample of a scrape
Scrape = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def metrics_url() -> str:
    port = free_port()
    assert serve_metrics(port)
    return f"http://127.0.0.1:{port}/metrics"


def scrape(url: str) -> Scrape:
    """Every sample ``url`` serves, keyed by sample name and labels."""
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.status == 200
        body = response.read().decode()
    out: Scrape = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out
