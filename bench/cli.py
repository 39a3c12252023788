"""How fast the CLI starts (``python -m bench cli``): ``--help`` and a read command against
the imports every command pays anyway.

Three figures, each a whole process timed from spawn to exit, interleaved round by round
so the machine's noise falls on all three alike:

- ``baseline``: ``python -c "import sqlalchemy, psycopg, typer"``, the floor of any command
  that reads the database and parses options;
- ``help``: ``dlc-ledger --help`` (lists every command from its summary, importing none);
- ``jobs_show``: ``dlc-ledger jobs show UID`` on the data at hand (by default the demo's
  embedded database; ``--database-url`` for another; the first job listed unless
  ``--uid``).

Goal (issue 33): ``help`` and ``jobs_show`` each at most 1.5 x ``baseline``. Medians and
minima of ``--repeat`` rounds; the last output line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

_CLI = [sys.executable, "-m", "dlc_ledger"]


def _env(database_url: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if database_url:
        env["DATABASE_URL"] = database_url
    return env


def _first_job(env: dict[str, str]) -> str:
    done = subprocess.run(
        [*_CLI, "jobs", "list", "--limit", "1", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"cannot list jobs: {done.stderr.strip()}")
    jobs = json.loads(done.stdout)
    if not jobs:
        raise SystemExit("no job projected: run ./dev demo first (or pass --database-url)")
    return str(jobs[0]["job_uid"])


def _time(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode().strip()[-400:]}")
    return elapsed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench cli", description=__doc__)
    parser.add_argument("--repeat", type=int, default=9, help="rounds (default 9)")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--uid", help="the job to show (default: the first listed)")
    args = parser.parse_args(argv)
    env = _env(args.database_url)
    uid = args.uid or _first_job(env)
    commands = {
        "baseline": [sys.executable, "-c", "import sqlalchemy, psycopg, typer"],
        "help": [*_CLI, "--help"],
        "jobs_show": [*_CLI, "jobs", "show", uid],
    }
    for argv_ in commands.values():  # warm the page cache and the bytecode
        _time(argv_, env)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.repeat):
        for name, argv_ in commands.items():
            times[name].append(_time(argv_, env))
    median = {name: statistics.median(t) for name, t in times.items()}
    result = {
        "repeat": args.repeat,
        "job_uid": uid,
        **{f"{name}_median_s": round(m, 3) for name, m in median.items()},
        **{f"{name}_min_s": round(min(t), 3) for name, t in times.items()},
        "help_ratio": round(median["help"] / median["baseline"], 2),
        "jobs_show_ratio": round(median["jobs_show"] / median["baseline"], 2),
    }
    width = max(len(n) for n in commands)
    for name in commands:
        ratio = "" if name == "baseline" else f"  {median[name] / median['baseline']:.2f} x"
        print(f"{name:<{width}}  median {median[name]:.3f} s  min {min(times[name]):.3f} s{ratio}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
