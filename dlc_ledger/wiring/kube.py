"""Connecting to a Kubernetes API server: one place for ``watch``, ``dispatch`` and ``up``.

A ``--server`` URL (such as a kubesim's) wins; else a kubeconfig (the file given, else
``KUBECONFIG`` / ``~/.kube/config``); else the in-cluster service account.
"""

from __future__ import annotations

from pathlib import Path

from kubernetes import client, config

__all__ = ["kube_configuration"]


def kube_configuration(
    server: str | None = None, kubeconfig: Path | None = None, kube_context: str | None = None
) -> client.Configuration:
    """A client configuration: ``server`` URL, else kubeconfig, else in-cluster."""
    configuration = client.Configuration()
    if server:
        configuration.host = server
        return configuration
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig) if kubeconfig else None,
            context=kube_context,
            client_configuration=configuration,
        )
    except (config.ConfigException, FileNotFoundError, TypeError):
        if kubeconfig is not None:
            raise
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    return configuration
