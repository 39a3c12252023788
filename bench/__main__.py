"""Dispatch ``python -m bench NAME [args]`` to ``bench.NAME:main``."""

from __future__ import annotations

import importlib
import sys


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        names = "store|ingest|watch|project|report|dispatch|api|cli|scale|freshness|partitions"
        print(f"usage: python -m bench {{{names}}} [options]")
        return 2
    name = sys.argv[1]
    try:
        module = importlib.import_module(f"bench.{name}")
    except ModuleNotFoundError:
        print(f"no benchmark named {name!r}", file=sys.stderr)
        return 2
    result: int = module.main(sys.argv[2:])
    return result


if __name__ == "__main__":
    sys.exit(main())
