"""Inventory as of any instant: registrations, cordons, removals, re-registration."""

from __future__ import annotations

import json

from consumers.projector import Projector
from ledger.events import NodeCordoned, NodeRegistered, NodeRemoved
from ledger.store.postgres import PostgresEventStore
from projections.registry import all_projections
from tests.support.builders import Narrator, at
from tests.support.clis import CliCall


def _node(name: str, pool: str, flavor: str, gpus: int) -> NodeRegistered:
    return NodeRegistered(
        node=name,
        pool=pool,
        resource_group=f"rg-{pool}",
        flavor=flavor,
        gpus=gpus,
        cpu_milli=gpus * 12_000,
        memory_mib=gpus * 65_536,
    )


def test_capacity_over_time(store: PostgresEventStore, cli: CliCall) -> None:
    n = Narrator()
    n.tell(_node("a1", "train", "gpu/A100", 8), "node/a1", at(0))
    n.tell(_node("a2", "train", "gpu/A100", 8), "node/a2", at(0))
    n.tell(_node("h1", "infer", "gpu/H100", 4), "node/h1", at(10))
    n.tell(NodeCordoned(node="a2"), "node/a2", at(100))
    n.tell(NodeRemoved(node="h1"), "node/h1", at(200))
    n.tell(NodeCordoned(node="a2", cordoned=False), "node/a2", at(300))
    n.tell(_node("a1", "train", "gpu/A100", 4), "node/a1", at(400))  # half its GPUs failed
    n.tell(NodeCordoned(node="ghost"), "node/ghost", at(5))  # never registered: ignored
    store.append(n.events)
    Projector(store, all_projections(), page_size=3).catch_up()

    def report(when: float | None, group: str) -> list[dict[str, object]]:
        args = ["report", "inventory", "--group-by", group, "--format", "json"]
        if when is not None:
            args += ["--at", at(when).isoformat()]
        return json.loads(cli(*args))  # type: ignore[no-any-return]

    def gpus(rows: list[dict[str, object]]) -> dict[object, object]:
        return {r[next(iter(r))]: (r["nodes"], r["cordoned_nodes"], r["gpus"]) for r in rows}

    assert gpus(report(5, "pool")) == {"train": (2, 0, 16)}
    assert gpus(report(10, "flavor")) == {"gpu/A100": (2, 0, 16), "gpu/H100": (1, 0, 4)}
    assert gpus(report(150, "pool")) == {"infer": (1, 0, 4), "train": (2, 1, 8)}
    assert gpus(report(200, "resource_group")) == {"rg-train": (2, 1, 8)}  # [from, to)
    assert gpus(report(350, "pool")) == {"train": (2, 0, 16)}
    assert gpus(report(None, "pool")) == {"train": (2, 0, 12)}
    row = report(None, "pool")[0]
    assert (row["mgpu"], row["cpu_milli"], row["memory_mib"]) == (12_000, 144_000, 786_432)
    assert report(-1, "pool") == []
    assert "pool" in cli("report", "inventory")
    assert "cannot group by" in cli("report", "inventory", "--group-by", "colour", ok=False)
