"""Kubernetes watchers: list + watch the cluster, map objects to domain events, publish them.

``listwatch`` (the reflector loop per resource type); the pure mapping of objects: ``api_values``
(quantities, timestamps), ``labels`` (the label / annotation contract and its bounds),
``facts`` (object → facts), ``event_factory`` (facts → envelopes); ``tracker`` (per-UID state
and transitions), ``publisher`` (bounded buffer to the producer), ``checkpoints`` (resume point
in PostgreSQL), ``runner`` (the process that wires them). See ``docs/watchers.md``.
"""

from consumers.watchers.listwatch import DEFAULT_RESOURCES, WatchedResource, WatchSettings
from consumers.watchers.runner import Watcher, WatcherStats

__all__ = ["DEFAULT_RESOURCES", "WatchSettings", "WatchedResource", "Watcher", "WatcherStats"]
