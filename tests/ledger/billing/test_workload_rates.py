"""A price book's own rates for services and notebooks (issue 46): the format, the lookup
and the exact bytes of books published before them."""

from __future__ import annotations

from decimal import Decimal

import pytest

from dlc_ledger.services.yaml_files import parse_price_book
from ledger.canonical import canonical_json
from ledger.prices import PriceBookError, PriceSchedule, implausible_rates

from .helpers import at

BOOK = """
id: b1
currency: USD
scale: 2
effective_from: "2026-01-01T00:00:00Z"
rates:
  public: {gpu/any: "2.40", gpu/A100: "4.00", cpu: "0.048"}
  spot: {gpu/any: "0.90"}
idle_multiplier: "0.30"
workload_rates:
  service: {public: {gpu/any: "3.10"}}
  notebook: {public: {cpu: "0.050"}}
"""


def _schedule() -> PriceSchedule:
    return PriceSchedule([parse_price_book(BOOK).to_event()])


def test_a_service_pays_its_own_rate_where_its_table_has_one_else_the_jobs() -> None:
    schedule = _schedule()
    when = at("2026-02-01T00:00")
    service = schedule.rate_at("gpu/H100", "public", when, "service")
    assert (service.rate, service.key, service.table) == (Decimal("3.10"), "gpu/any", "service")
    # its own gpu/any wins over the jobs' per-model key: the workload's table comes first
    assert schedule.rate_at("gpu/A100", "public", when, "service").rate == Decimal("3.10")
    cpu = schedule.rate_at("cpu", "public", when, "service")
    assert (cpu.rate, cpu.table) == (Decimal("0.048"), "job")
    assert schedule.rate_at("cpu", "public", when, "notebook").rate == Decimal("0.050")
    assert schedule.rate_at("gpu/any", "public", when, "notebook").rate == Decimal("2.40")
    assert schedule.rate_at("gpu/A100", "public", when).rate == Decimal("4.00")
    idle = schedule.rate_at("gpu/any", "idle", when, "service")
    assert (idle.rate, idle.source) == (Decimal("0.930"), "idle")
    # spot is the market's price, the same for every workload; quota is prepaid
    assert schedule.rate_at("gpu/any", "spot", when, "service").rate == Decimal("0.90")
    assert schedule.rate_at("gpu/any", "quota", when, "service").rate == 0


def test_a_book_without_workload_rates_keeps_its_exact_bytes() -> None:
    plain = parse_price_book(BOOK.split("workload_rates:")[0]).to_event()
    assert "workload_rates" not in canonical_json(plain.model_dump(mode="json")).decode()
    priced = parse_price_book(BOOK).to_event()
    assert priced.model_dump(mode="json")["workload_rates"] == {
        "service": {"public": {"gpu/any": "3.10"}, "spot": {}},
        "notebook": {"public": {"cpu": "0.050"}, "spot": {}},
    }


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('{training: {public: {gpu/any: "1.00"}}}', "workload_rates.training"),
        ("{service: {public: {gpu/any: 3.1}}}", "quoted decimal"),
        ("{service: {public: {}}}", "at least 1"),
        ('{service: {spot: {gpu/any: "1.00"}}}', "spot"),
    ],
)
def test_bad_workload_rates_are_refused_by_name(table: str, message: str) -> None:
    text = BOOK.split("workload_rates:")[0] + f"workload_rates: {table}\n"
    with pytest.raises(PriceBookError, match=message):
        parse_price_book(text)


def test_a_workload_rate_above_the_bound_is_implausible() -> None:
    text = BOOK.replace('"3.10"', '"3100.00"')
    assert implausible_rates(parse_price_book(text).to_event()) == [
        "service public gpu/any 3100.00 USD/h"
    ]
