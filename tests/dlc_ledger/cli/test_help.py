"""Every command and command group answers ``--help`` (the CLI's own table of contents),
and a command imports only its own module."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from dlc_ledger.cli.app import COMMANDS, SUMMARIES, app
from dlc_ledger.cli.lazy_groups import load_command
from dlc_ledger.cli.report import REPORTS
from dlc_ledger.cli.report import SUMMARIES as REPORT_SUMMARIES


def _paths(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    # through list_commands/get_command: most commands are imported on first lookup
    ctx = typer.Context(group)
    found = [prefix]
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        if hasattr(command, "list_commands"):  # a group (typer vendors its own click)
            found += _paths(command, (*prefix, name))
        else:
            found.append((*prefix, name))
    return found


COMMANDS_FOUND = _paths(typer.main.get_group(app))


def test_the_cli_has_the_documented_commands() -> None:
    tops = {path[0] for path in COMMANDS_FOUND if path}
    for name in ("demo", "replay", "watch", "ingest", "project", "projections", "verify",
                 "db", "dead-letters", "broker", "jobs", "quotas", "prices", "billing",
                 "invoices", "report", "queue", "api", "tokens", "up", "subscriptions",
                 "resource-groups", "runs", "export", "import"):  # fmt: skip
        assert name in tops
    reports = {path[1] for path in COMMANDS_FOUND if len(path) == 2 and path[0] == "report"}
    assert reports == {"usage", "cost", "quota-usage", "quota-history", "quota-series", "occupancy",
                       "inventory", "waits", "preemptions", "goodput", "estimates",
                       "subscriptions"}  # fmt: skip


@pytest.mark.parametrize("path", COMMANDS_FOUND, ids=lambda p: " ".join(p) or "dlc-ledger")
def test_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def test_a_command_imports_only_its_own_module() -> None:
    # `jobs --help` must not pay for Kafka, Kubernetes or the other command modules
    result = _run(
        "import sys\n"
        "from dlc_ledger.cli.app import main\n"
        "code = main(['jobs', '--help'])\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('dlc_ledger.', 'kafka', "
        "'kubernetes')))\n"
        "print(code, ' '.join(loaded))\n"
    )
    code, _, loaded = result.stdout.strip().splitlines()[-1].partition(" ")
    assert code == "0", result.stderr
    modules = set(loaded.split())
    assert "dlc_ledger.cli.jobs" in modules
    others = {target.partition(":")[0] for name, target in COMMANDS.items() if name != "jobs"}
    assert not modules & (others - {"dlc_ledger.cli.jobs"}), modules
    assert not any(m.startswith(("kafka", "kubernetes")) for m in modules), modules


def test_the_cli_runs_without_click_installed() -> None:
    # typer vendors click; click itself arrives only with dev tools, never in production
    result = _run(
        "import sys\n"
        "sys.modules['click'] = None  # any `import click` now fails\n"
        "from dlc_ledger.cli.app import main\n"
        "codes = [main(path) for path in (['--help'], ['report', '--help'], ['nosuch'])]\n"
        "print(*codes)\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "0 0 2", result.stdout
    assert "No such command 'nosuch'" in result.stderr


def _first_paragraph(command: Any) -> str:
    return " ".join((command.short_help or command.help or "").split("\n\n")[0].split())


@pytest.mark.parametrize(
    ("names", "summaries", "group"),
    [(COMMANDS, SUMMARIES, ()), (REPORTS, REPORT_SUMMARIES, ("report",))],
    ids=["dlc-ledger", "report"],
)
def test_each_listed_summary_is_its_commands_own_help(
    names: dict[str, str], summaries: dict[str, str], group: tuple[str, ...]
) -> None:
    # the help page lists the summaries without importing the commands: they must not drift
    assert set(summaries) == set(names)
    for name, target in names.items():
        assert summaries[name] == _first_paragraph(load_command(name, target)), name


def test_help_lists_the_commands_without_importing_them() -> None:
    result = _run(
        "import sys\n"
        "from dlc_ledger.cli.app import main\n"
        "code = main(['--help'])\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('dlc_ledger.', 'sqlalchemy',"
        " 'kafka', 'kubernetes', 'psycopg')))\n"
        "print(code, ' '.join(loaded))\n"
    )
    code, _, loaded = result.stdout.strip().splitlines()[-1].partition(" ")
    assert code == "0", result.stderr
    assert "ingest" in result.stdout and "Consume Kafka into the event store" in result.stdout
    assert set(loaded.split()) <= {
        "dlc_ledger.cli",
        "dlc_ledger.cli.app",
        "dlc_ledger.cli.lazy_groups",
    }
