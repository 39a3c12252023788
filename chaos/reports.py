"""``python -m chaos.reports OUT.json FROM TO``: every report a run is compared by, as the
CLI prints it.

Run once per run, with that run's ``DATABASE_URL``, after its components have stopped: the
commands run in this one process (one import, not one interpreter per command: a run has
hundreds of jobs to show), each captured as the user would read it, stdout byte for byte
and the exit code.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from dlc_ledger.cli.app import app
from ledger.canonical import format_timestamp

__all__ = ["main"]

#: instants of the replayed window at which quota usage is compared
QUOTA_SAMPLES = 6


def _commands(start: datetime, end: datetime) -> list[tuple[str, ...]]:
    step = (end - start) / QUOTA_SAMPLES
    instants = [format_timestamp(start + step * i) for i in range(1, QUOTA_SAMPLES + 1)]
    return [
        ("verify",),
        ("report", "cost", "--group-by", "workspace", "--format", "json"),
        ("report", "cost", "--group-by", "workspace,month", "--source", "ledger", "--format",
         "json"),
        ("report", "cost", "--group-by", "job", "--source", "rated", "--format", "json"),
        ("report", "usage", "--group-by", "workspace", "--format", "json"),
        ("report", "usage", "--group-by", "job", "--format", "json"),
        ("jobs", "list", "--format", "json", "--limit", "10000"),
        ("invoices", "list", "--format", "json", "--limit", "10000"),
        ("subscriptions", "list", "--format", "json"),
        ("notifications", "deliveries", "--format", "json", "--limit", "10000"),
        *(("report", "quota-usage", "--at", at, "--format", "json") for at in instants),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out, start, end = (
        Path(args[0]),
        datetime.fromisoformat(args[1]),
        datetime.fromisoformat(args[2]),
    )
    runner = CliRunner()
    results: dict[str, dict[str, object]] = {}

    def run(command: tuple[str, ...]) -> str:
        result = runner.invoke(app, list(command))
        results[" ".join(command)] = {"exit": result.exit_code, "stdout": result.stdout}
        return result.stdout

    for command in _commands(start, end + timedelta(seconds=0)):
        run(command)
    jobs = json.loads(results["jobs list --format json --limit 10000"]["stdout"] or "[]")  # type: ignore[arg-type]
    for job in _rows(jobs):
        run(("jobs", "show", str(job["job_uid"]), "--format", "json"))
    invoices = json.loads(results["invoices list --format json --limit 10000"]["stdout"] or "[]")  # type: ignore[arg-type]
    for invoice in _rows(invoices):
        run(("invoices", "show", str(invoice["invoice_id"]), "--format", "json"))
    out.write_text(json.dumps(results, indent=1, sort_keys=True))
    return 0


def _rows(document: object) -> list[dict[str, object]]:
    """A JSON report's rows: the list itself, or the first list in the object."""
    if isinstance(document, list):
        return [row for row in document if isinstance(row, dict)]
    if isinstance(document, dict):
        for value in document.values():
            if isinstance(value, list):
                return [row for row in value if isinstance(row, dict)]
    return []


if __name__ == "__main__":
    sys.exit(main())
