"""Every ``--group-by`` key of ``report usage`` and ``report cost`` (both sources), in every
format, through the real CLI, checked against figures computed here from the intervals.

Issue 24 item 3: ``GROUP BY user`` in SQL is PostgreSQL's CURRENT_USER, so usage by
user returned the database role and cost by user failed; item 4: cost by job.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from typing import Any

import pytest

from dlc_ledger.services.billing import publish_price_book, tick
from ledger.envelopes import Envelope
from ledger.store.postgres import PostgresEventStore
from projections.billing.projection import catch_up_billing
from projections.billing.reports import job_cost
from tests.support.billing import at, book_yaml, ended, query, started
from tests.support.clis import CliCall

KEYS = ("workspace", "quota", "user", "flavor", "billing_mode", "day", "month", "job")
FORMATS = ("table", "json", "csv")
WINDOW = ("--from", "2026-11-01T00:00:00Z", "--to", "2027-01-01T00:00:00Z")
# book_yaml's rates per unit-hour; idle = public x 0.30
GPU = {"public": Fraction("2.40"), "idle": Fraction("2.40") * Fraction("0.30"),
       "spot": Fraction("0.90")}  # fmt: skip
CPU = {"public": Fraction("0.048")}


@dataclass(frozen=True)
class Occ:
    occ: str
    workspace: str
    user: str
    quota: str | None
    flavor: str
    mode: str
    mgpu: int
    cpu_milli: int
    start: datetime
    end: datetime

    @property
    def job(self) -> str:
        return f"job-{self.occ}"

    def events(self) -> list[Envelope]:
        return [
            started(self.occ, self.start, workspace=self.workspace, user=self.user,
                    quota=self.quota, flavor=self.flavor, mode=self.mode,  # type: ignore[arg-type]
                    mgpu=self.mgpu, cpu_milli=self.cpu_milli),
            ended(self.occ, self.end),
        ]  # fmt: skip


OCCS = (
    Occ("o1", "ws-a", "alice", "qa", "gpu/any", "public", 1000, 0,
        at("2026-11-05T00:00"), at("2026-11-05T10:00")),
    # crosses a month boundary: 4 h in November, 4 h in December
    Occ("o2", "ws-a", "bob", "qa", "gpu/A100", "idle", 2000, 0,
        at("2026-11-30T20:00"), at("2026-12-01T04:00")),
    Occ("o3", "ws-b", "alice", None, "gpu/any", "spot", 500, 0,
        at("2026-12-02T00:00"), at("2026-12-02T06:00")),
    # crosses a day boundary; the CPU part costs a fraction of a cent
    Occ("o4", "ws-b", "carol", "qb", "gpu/any", "public", 1000, 2000,
        at("2026-12-02T12:00"), at("2026-12-03T12:00")),
)  # fmt: skip


def _pieces(o: Occ) -> list[tuple[datetime, datetime]]:
    """``o``'s interval split at UTC midnights."""
    out, a = [], o.start
    while a < o.end:
        b = min(o.end, datetime(a.year, a.month, a.day, tzinfo=a.tzinfo) + timedelta(days=1))
        out.append((a, b))
        a = b
    return out


def _expected(keys: tuple[str, ...]) -> tuple[dict[tuple[str, ...], list[int]],
                                              dict[tuple[str, ...], Fraction]]:  # fmt: skip
    usage: dict[tuple[str, ...], list[int]] = {}
    cost: dict[tuple[str, ...], Fraction] = {}
    for o in OCCS:
        for a, b in _pieces(o):
            seconds = int((b - a).total_seconds())
            attrs = {"workspace": o.workspace, "quota": o.quota or "-", "user": o.user,
                     "flavor": o.flavor, "billing_mode": o.mode, "day": f"{a:%Y-%m-%d}",
                     "month": f"{a:%Y-%m}", "job": o.job}  # fmt: skip
            key = tuple(attrs[k] for k in keys)
            u = usage.setdefault(key, [0, 0, 0])
            u[0] += o.mgpu * seconds
            u[1] += o.cpu_milli * seconds
            hours = Fraction(seconds, 3600)
            amount = GPU[o.mode] * o.mgpu / 1000 * hours
            amount += CPU.get(o.mode, Fraction(0)) * o.cpu_milli / 1000 * hours
            cost[key] = cost.get(key, Fraction(0)) + amount * 100  # cents
    return usage, cost


def _rows(out: str, fmt: str) -> list[dict[str, str]]:
    """Rows of any format as strings (numbers without thousands separators)."""
    if fmt == "json":
        rows: list[dict[str, Any]] = json.loads(out)
    elif fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(out)))
    else:
        lines = [line for line in out.splitlines() if line.strip(" -")]  # no rule line
        header = lines[0].split()
        rows = [dict(zip(header, line.split(), strict=True)) for line in lines[1:]]
    return [{k: str(v).replace(",", "") for k, v in r.items()} for r in rows]


@pytest.fixture
def billed(store: PostgresEventStore) -> PostgresEventStore:
    publish_price_book(store, book_yaml("b1", "2026-10-01T00:00:00Z"), at=at("2026-10-01T00:00"))
    store.append([e for o in OCCS for e in o.events()])
    tick(store, at("2027-01-03T00:00"))  # everything final, November and December invoiced
    return store


def _groupings() -> list[tuple[str, ...]]:
    return [(k,) for k in KEYS] + [("user", "month"), ("workspace", "job"), ("quota", "day")]


def test_usage_by_every_key_in_every_format(billed: PostgresEventStore, cli: CliCall) -> None:
    for keys in _groupings():
        usage, _ = _expected(keys)
        for fmt in FORMATS:
            out = cli("report", "usage", "--group-by", ",".join(keys), *WINDOW, "--format", fmt)
            got = {
                tuple(r[k] for k in keys): [
                    int(r["mgpu_seconds"]),
                    int(r["cpu_milli_seconds"]),
                    int(r["memory_mib_seconds"]),
                ]
                for r in _rows(out, fmt)
            }
            assert got == usage, (keys, fmt, out)


@pytest.mark.parametrize("source", ["ledger", "rated"])
def test_cost_by_every_key_in_every_format(
    billed: PostgresEventStore, cli: CliCall, source: str
) -> None:
    for keys in _groupings():
        _, cost = _expected(keys)
        if source == "ledger":  # the ledger's cost of a closed period is its invoices' total
            cost = _with_roundings(keys, cost, cli)
        if source == "ledger" and "day" in keys:
            error = cli("report", "cost", "--group-by", ",".join(keys), *WINDOW,
                        "--source", source, ok=False)  # fmt: skip
            assert "--source rated" in error
            continue
        for fmt in FORMATS:
            out = cli("report", "cost", "--group-by", ",".join(keys), *WINDOW,
                      "--source", source, "--format", fmt)  # fmt: skip
            rows = _rows(out, fmt)
            assert all(r["currency"] == "USD" for r in rows)
            if fmt != "table":  # a table shows people the rounded decimal amount only
                got = {tuple(r[k] for k in keys): Decimal(r["cost_minor_precise"]) for r in rows}
                assert got == {k: Decimal(v.numerator) / v.denominator for k, v in cost.items()}, (
                    keys, fmt, source, out,
                )  # fmt: skip
            # a table shows the decimal amount only (USD: two decimals)
            rounded = {
                tuple(r[k] for k in keys): int(r["cost_minor"])
                if "cost_minor" in r
                else int(Decimal(r["cost"]) * 100)
                for r in rows
            }
            assert rounded == {
                k: int((Decimal(v.numerator) / v.denominator).to_integral_value(ROUND_HALF_EVEN))
                for k, v in cost.items()
            }


def _with_roundings(
    keys: tuple[str, ...], cost: dict[tuple[str, ...], Fraction], cli: CliCall
) -> dict[tuple[str, ...], Fraction]:
    """``cost`` plus each invoice's rounding (its total less the exact cost of its workspace
    and month): merged on workspace and month, a ``(rounding)`` row on any other key."""
    _, exact = _expected(("workspace", "month"))
    out = dict(cost)
    for invoice in json.loads(cli("invoices", "list", "--format", "json")):
        rounding = invoice["total_minor"] - exact[(invoice["workspace"], invoice["period"])]
        if not rounding:
            continue
        values = {"workspace": invoice["workspace"], "month": invoice["period"]}
        key = tuple(values.get(k, "(rounding)") for k in keys)
        out[key] = out.get(key, Fraction(0)) + rounding
    return out


def test_usage_by_user_is_the_jobs_user_not_the_database_role(
    billed: PostgresEventStore, cli: CliCall
) -> None:
    rows = json.loads(cli("report", "usage", "--group-by", "user", "--format", "json"))
    assert sorted(r["user"] for r in rows) == ["alice", "bob", "carol"]


def _owed(store: PostgresEventStore, workspace: str, period: str) -> Decimal:
    catch_up_billing(store)
    (row,) = query(
        store,
        "SELECT COALESCE(sum(p.amount_minor), 0) FROM billing_postings p "
        "JOIN billing_transactions t USING (transaction_id) "
        "WHERE t.period = :p AND p.account = :a",
        p=period, a=f"receivable/{workspace}",
    )  # fmt: skip
    return Decimal(row[0])


def test_invoice_lines_round_once_and_the_books_hold_the_total(
    billed: PostgresEventStore, cli: CliCall
) -> None:
    invoices = json.loads(cli("invoices", "list", "--workspace", "ws-b", "--format", "json"))
    (dec,) = [i for i in invoices if i["period"] == "2026-12"]
    detail = json.loads(cli("invoices", "show", dec["invoice_id"], "--format", "json"))
    lines = [(li["resource"], li["billing_mode"], li["rate"], li["amount_precise"],
              li["amount_minor"]) for li in detail["lines"]]  # fmt: skip
    assert lines == [
        ("cpu", "public", "0.048", "230.4", 230),  # o4: 48 core-hours, rounded once here
        ("gpu/any", "public", "2.40", "5760", 5760),
        ("gpu/any", "spot", "0.90", "270", 270),
    ]
    assert dec["total_minor"] == 6260
    # the -0.4 of rounding is posted, so what ws-b owes for December is the invoice total
    assert _owed(billed, "ws-b", "2026-12") == 6260
    cli("invoices", "void", dec["invoice_id"], "--reason", "test")
    assert _owed(billed, "ws-b", "2026-12") == Decimal("6260.4")  # rounding reversed
    assert "issued 1 invoices" in cli(
        "billing", "run", "--until", "2027-01-03T01:00:00Z", "--force"
    )
    assert _owed(billed, "ws-b", "2026-12") == 6260


def test_job_cost_posted_and_rated_per_flavor_and_mode(billed: PostgresEventStore) -> None:
    catch_up_billing(billed)
    # an occupancy of job-o4 still running: rated to the cluster clock, not yet posted
    billed.append([started("o4b", at("2027-01-02T00:00"), job="job-o4", workspace="ws-b",
                           user="carol", quota="qb", mgpu=1000)])  # fmt: skip
    catch_up_billing(billed)
    with billed.engine.connect() as conn:
        (o4,) = job_cost(conn, "job-o4")
        assert (o4["flavor"], o4["billing_mode"], o4["currency"]) == ("gpu/any", "public", "USD")
        assert (o4["posted_minor_precise"], o4["posted_minor"]) == (Decimal("5990.4"), 5990)
        # the cluster clock is the latest instant recorded: o4b's start, so nothing more yet
        assert (o4["rated_minor_precise"], o4["rated_minor"]) == (Decimal("5990.4"), 5990)
        (o2,) = job_cost(conn, "job-o2")  # idle across November and December: 8 h x 2 GPUs
        assert (o2["flavor"], o2["billing_mode"]) == ("gpu/A100", "idle")
        assert o2["posted_minor_precise"] == o2["rated_minor_precise"] == Decimal("1152")
        assert job_cost(conn, "job-nope") == []


def test_jobs_show_says_what_the_job_cost(billed: PostgresEventStore, cli: CliCall) -> None:
    cli("project")
    (cost,) = json.loads(cli("jobs", "show", "job-o4", "--format", "json"))["cost"]
    assert (cost["flavor"], cost["billing_mode"], cost["currency"], cost["scale"]) == (
        "gpu/any", "public", "USD", 2,
    )  # fmt: skip
    assert (cost["posted_minor"], cost["posted"], cost["posted_precise"]) == (
        5990, "59.90", "59.904",
    )  # fmt: skip
    table = cli("jobs", "show", "job-o4")
    assert "cost (posted to the ledger" in table and "59.90" in table
