"""Input and output consistency through the real CLI: one instant parser, unknown names
and reversed windows refused, page maxima, amounts with currency and scale, one table
rule, every time option naming its clock, invoices with both clocks."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
import typer

from dlc_ledger.cli.app import app, main
from ledger.envelopes import make_envelope
from ledger.events import JobSubmitted, ReplicaSpec
from ledger.ids import fact_event_id
from ledger.store.postgres import PostgresEventStore
from tests.support.billing import DEMO_BOOK, at, ended, started
from tests.support.clis import CliCall
from tests.support.demo_files import DEMO_QUOTAS


def _submitted(job: str, workspace: str, user: str, when: str) -> object:
    return make_envelope(
        JobSubmitted(
            job_uid=job,
            name=job,
            workspace=workspace,
            user=user,
            replicas=(ReplicaSpec(count=1, mgpu=1000, cpu_milli=0, memory_mib=0),),
        ),
        event_id=fact_event_id("test", "Job", job, "submitted"),
        stream=f"job/{job}",
        occurred_at=at(when),
        observed_at=at(when),
        source="kube-watcher/test",
    )


@pytest.fixture
def billed(store: PostgresEventStore, cli: CliCall) -> str:
    """ws-a ran one GPU for 29 days of November 2026 (1,670.40 USD) and was invoiced."""
    cli("prices", "publish", str(DEMO_BOOK))
    store.append(
        [
            _submitted("job-a", "ws-a", "alice", "2026-11-01T00:00"),  # type: ignore[list-item]
            started("a", at("2026-11-01T00:00")),
            ended("a", at("2026-11-30T00:00")),
        ]
    )
    cli("project")
    # past the last fact on purpose: November closes after its grace
    assert "issued 1 invoices" in cli(
        "billing", "run", "--until", "2026-12-02T00:00:00Z", "--force"
    )
    (invoice,) = json.loads(cli("invoices", "list", "--format", "json"))
    return str(invoice["invoice_id"])


# --- one instant parser ----------------------------------------------------------------


def test_a_bare_date_an_offset_and_no_offset_mean_the_same_instants(
    billed: str, cli: CliCall
) -> None:
    def usage(*window: str) -> list[dict[str, object]]:
        return json.loads(cli("report", "usage", *window, "--format", "json"))  # type: ignore[no-any-return]

    by_date = usage("--from", "2026-11-02", "--to", "2026-11-03")  # midnight UTC
    assert by_date == [
        {"workspace": "ws-a", "mgpu_seconds": 1000 * 86400, "cpu_milli_seconds": 0,
         "memory_mib_seconds": 0}
    ]  # fmt: skip
    assert usage("--from", "2026-11-02T00:00", "--to", "2026-11-03T00:00:00") == by_date
    assert usage("--from", "2026-11-02T01:00+01:00", "--to", "2026-11-03T00:00:00Z") == by_date
    # the same parser everywhere: the cluster reports and billing read dates too
    cli("report", "quota-usage", "--at", "2026-11-02")
    cli("report", "occupancy", "--at", "2026-11-02")
    cli("report", "inventory", "--at", "2026-11-02T00:00")


def test_a_bad_instant_is_one_line_naming_the_option(
    billed: str, cli: CliCall, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    for argv in (
        ["report", "usage", "--from", "2026-13-01"],
        ["report", "cost", "--as-of", "yesterday"],
        ["report", "quota-history", "--to", "2026-11-01T25:00"],
        ["billing", "run", "--until", "20261201"],
    ):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1, err
        assert argv[2] in err and "e.g. 2026-11-01" in err, err


def test_a_reversed_window_is_an_error(billed: str, cli: CliCall) -> None:
    for report in ("usage", "cost", "quota-history"):
        out = cli(
            "report", report, "--from", "2026-11-06T00:00:00Z", "--to", "2026-11-05T00:00:00Z",
            ok=False,
        )  # fmt: skip
        assert "is before --from" in out, (report, out)
    assert "window is empty" in cli(
        "report", "usage", "--from", "2026-11-06", "--to", "2026-11-06", ok=False
    )


def test_a_huge_limit_is_a_usage_error(billed: str, cli: CliCall) -> None:
    out = cli("jobs", "list", "--limit", "100000000000000000000", ok=False)
    assert "--limit" in out and "10000" in out


# --- unknown names -----------------------------------------------------------------------


def test_an_unknown_name_in_a_filter_is_an_error_a_known_one_may_be_empty(
    billed: str, cli: CliCall
) -> None:
    out = cli("jobs", "list", "--workspace", "ws-nope", ok=False)
    assert "no workspace 'ws-nope'" in out and "ws-a" in out
    assert "no user 'bob'" in cli("jobs", "list", "--user", "bob", ok=False)
    assert "job-a" in cli("jobs", "list", "--workspace", "ws-a", "--user", "alice")
    assert cli("jobs", "list", "--workspace", "ws-a", "--status", "Succeeded").strip() == (
        "(no rows)"
    )
    cli("quotas", "apply", str(DEMO_QUOTAS), "--at", "2026-11-01")
    assert "no quota 'nope'" in cli("report", "quota-history", "--quota", "nope", ok=False)
    assert "no flavor 'gpu/h100'" in cli(
        "report", "quota-history", "--flavor", "gpu/h100", ok=False
    )
    assert "not a period" in cli("invoices", "list", "--period", "2099-13", ok=False)
    out = cli("invoices", "list", "--period", "2099-11", ok=False)
    assert "no invoiced period '2099-11'" in out and "2026-11" in out
    assert "no workspace 'ws-nope'" in cli("invoices", "list", "--workspace", "ws-nope", ok=False)
    # known names, nothing matching both: an honest empty table
    assert cli("invoices", "list", "--workspace", "ws-be", "--period", "2026-11").strip() == (
        "(no rows)"
    )


# --- amounts and tables ------------------------------------------------------------------


def test_amounts_carry_currency_scale_and_a_decimal_string(billed: str, cli: CliCall) -> None:
    (cost,) = json.loads(cli("report", "cost", "--format", "json"))
    assert cost == {"workspace": "ws-a", "cost_minor": 167040, "cost": "1670.40",
                    "cost_minor_precise": "167040", "cost_precise": "1670.4",
                    "currency": "USD", "scale": 2}  # fmt: skip
    (row,) = csv.DictReader(io.StringIO(cli("report", "cost", "--format", "csv")))
    assert (row["cost_minor"], row["cost"], row["currency"], row["scale"]) == (
        "167040", "1670.40", "USD", "2"
    )  # fmt: skip
    (invoice,) = json.loads(cli("invoices", "list", "--format", "json"))
    assert (invoice["total_minor"], invoice["total"], invoice["currency"], invoice["scale"]) == (
        167040, "1670.40", "USD", 2
    )  # fmt: skip
    assert invoice["credited"] == "0.00"
    cli("invoices", "credit", billed, "--amount", "0.40", "--reason", "goodwill")
    detail = json.loads(cli("invoices", "show", billed, "--format", "json"))
    assert detail["total"] == "1670.40" and detail["credited"] == "0.40"
    (line,) = detail["lines"]
    assert (line["amount_minor"], line["amount"], line["currency"], line["scale"]) == (
        167040, "1670.40", "USD", 2
    )  # fmt: skip
    (note,) = detail["credit_notes"]
    assert (note["amount_minor"], note["amount"], note["scale"]) == (40, "0.40", 2)
    (line_csv,) = csv.DictReader(io.StringIO(cli("invoices", "show", billed, "--format", "csv")))
    assert (line_csv["amount"], line_csv["currency"]) == ("1670.40", "USD")


def test_tables_right_align_numbers_with_thousands_separators(billed: str, cli: CliCall) -> None:
    usage = cli("report", "usage").splitlines()
    assert usage[0].split() == ["workspace", "mgpu_seconds", "cpu_milli_seconds",
                                "memory_mib_seconds"]  # fmt: skip
    assert usage[2].split()[:2] == ["ws-a", "2,505,600,000"]
    assert usage[2].endswith(" 0") and len(usage[2]) == len(usage[0])  # right-aligned
    cost = cli("report", "cost")
    assert "1,670.40" in cost and "167040" not in cost  # people read the decimal amount
    listed = cli("invoices", "list")
    assert "1,670.40" in listed
    quota = cli("report", "quota-usage")
    assert "min" in quota  # no quota tree yet: still a table
    cli("quotas", "apply", str(DEMO_QUOTAS), "--at", "2026-11-01")
    quota = cli("report", "quota-usage")
    assert " 4,000 " in quota and " 1,200,000 " in quota  # below 10,000 too, not only above


def test_the_cluster_reports_accept_csv(billed: str, cli: CliCall) -> None:
    for args in (
        ["report", "occupancy", "--at", "2026-11-02"],
        ["report", "inventory"],
        ["report", "quota-usage"],
        ["report", "quota-history"],
    ):
        out = cli(*args, "--format", "csv").strip()
        assert out == "" or ("," in out.splitlines()[0] and not out.startswith("[")), (args, out)
    (occupied,) = csv.DictReader(
        io.StringIO(cli("report", "occupancy", "--at", "2026-11-02", "--format", "csv"))
    )
    assert occupied["workspace"] == "ws-a"


# --- clocks ------------------------------------------------------------------------------


def _commands(group: typer.Typer) -> list[tuple[str, Any]]:
    root = typer.main.get_group(group)
    found = []

    def walk(cmd: object, path: str) -> None:
        if hasattr(cmd, "list_commands"):
            ctx = typer.Context(cmd)  # type: ignore[arg-type]
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), f"{path} {name}".strip())
        else:
            found.append((path, cmd))  # type: ignore[arg-type]

    walk(root, "")
    return found


def test_every_time_option_names_its_clock() -> None:
    checked = []
    for path, command in _commands(app):
        for param in command.params:
            if param.param_type_name != "option":
                continue
            # export --to DIR: a place, not a time (the annotation may still be a string)
            if getattr(param.bare_type(), "__name__", param.bare_type()) == "Path":
                continue
            if not {"--from", "--to", "--at", "--until", "--as-of", "--epoch"} & set(param.opts):
                continue
            text = param.help or ""
            clock = "store time" if "--as-of" in param.opts else "cluster time"
            assert clock in text, (path, param.opts, text)
            checked.append((path, param.opts[0]))
    assert len(checked) >= 12, checked


def test_invoices_show_issued_at_and_recorded_at_side_by_side(billed: str, cli: CliCall) -> None:
    (invoice,) = json.loads(cli("invoices", "list", "--format", "json"))
    assert invoice["issued_at"].startswith("2026-12-02T00:00:00")  # the run's cluster 'now'
    assert invoice["recorded_at"] > "2026-12-03"  # the wall clock of the test, store time
    header = cli("invoices", "list").splitlines()[0].split()
    assert header.index("recorded_at") == header.index("issued_at") + 1
    shown = cli("invoices", "show", billed)
    assert "issued_at 2026-12-02T00:00:00+00:00 (cluster time)" in shown
    assert "recorded_at" in shown and "(store time)" in shown
    detail = json.loads(cli("invoices", "show", billed, "--format", "json"))
    assert detail["issued_at"] == invoice["issued_at"]
    assert detail["recorded_at"] == invoice["recorded_at"]


def test_cost_nets_credit_notes_per_workspace_and_month(billed: str, cli: CliCall) -> None:
    cli("invoices", "credit", billed, "--amount", "70.40", "--reason", "outage")
    (row,) = json.loads(cli("report", "cost", "--group-by", "workspace,month", "--net-credits",
                            "--format", "json"))  # fmt: skip
    assert (row["month"], row["cost_minor"], row["credited_minor"], row["net_minor"]) == (
        "2026-11", 167040, 7040, 160000
    )  # fmt: skip
    assert (row["credited"], row["net"], row["currency"]) == ("70.40", "1600.00", "USD")
    (plain,) = json.loads(cli("report", "cost", "--format", "json"))
    assert "credited_minor" not in plain and plain["cost_minor"] == 167040  # gross by default
    error = cli("report", "cost", "--group-by", "user", "--net-credits", ok=False)
    assert "workspace and/or month only" in error
    # a window that leaves November out leaves its credit out too
    assert json.loads(cli("report", "cost", "--net-credits", "--from", "2026-12-01",
                          "--format", "json")) == []  # fmt: skip


def test_a_usage_error_is_one_line_with_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    from dlc_ledger.cli.app import main

    for args, option in (
        (("jobs", "list", "--limit", "0"), "--limit"),
        (("subscriptions", "purchase", "--group", "g", "--spec", "s", "--nodes", "0",
          "--term", "month", "--workspace", "w"), "--nodes"),
        (("subscriptions", "purchase", "--group", "g", "--spec", "s", "--nodes", "1",
          "--term", "week", "--workspace", "w"), "--term"),
    ):  # fmt: skip
        assert main(list(args)) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert f"Invalid value for '{option}'" in line and "--help)" in line, line
