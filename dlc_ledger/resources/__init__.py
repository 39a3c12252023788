"""Files the product ships inside its wheel: the demo price book and quota trees.

Found with :mod:`importlib.resources` (never from ``__file__`` or the working directory),
so an installed ``dlc-ledger demo`` finds them from any directory. The traces a replay
reads ship with the stand-in cluster that replays them (:mod:`kubesim.traces`).
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable

__all__ = [
    "COMBINED_QUOTAS",
    "DEMO_BUDGETS",
    "DEMO_PRICE_BOOK",
    "DEMO_QUOTAS",
    "DEMO_SUBSCRIPTIONS",
]

#: The demo's price book (format: docs/billing.md): ``dlc-ledger prices publish``.
DEMO_PRICE_BOOK: Traversable = files(__name__) / "pricebooks" / "demo-2026.yaml"
#: The demo's quota tree for the openb replay (docs/quotas.md): ``dlc-ledger quotas apply``.
DEMO_QUOTAS: Traversable = files(__name__) / "quotas" / "demo.yaml"
#: The quota tree of the combined replay, ``replay --trace openb+dlrm``: openb's workspaces
#: on training quotas, DLRM's apps on an inference quota.
COMBINED_QUOTAS: Traversable = files(__name__) / "quotas" / "openb-dlrm.yaml"
#: What the demo buys at the replay's epoch and which quotas draw on it
#: (docs/subscriptions.md).
DEMO_SUBSCRIPTIONS: Traversable = files(__name__) / "subscriptions" / "demo.yaml"
#: The budgets the demo's closed loop runs under (docs/billing.md, "Budgets").
DEMO_BUDGETS: Traversable = files(__name__) / "budgets" / "demo.yaml"
