"""The price book format, its validation errors, and the effective-dated schedule."""

from __future__ import annotations

from decimal import Decimal

import pytest

from dlc_ledger.services.yaml_files import load_price_book, parse_price_book
from ledger.prices import NoApplicableRate, PriceBookError, PriceSchedule
from tests.support.demo_files import DEMO_PRICE_BOOK as DEMO

from .helpers import at, book, spot

DEMO_TEXT = """\
id: demo-2026
currency: USD
scale: 2                      # minor units: cents
effective_from: "2026-01-01T00:00:00Z"
rates:                        # per unit-hour: GPU-hour, core-hour, GiB-hour
  public: {gpu/any: "2.40", cpu: "0.048", memory: "0.006"}
  spot:   {gpu/any: "0.90", cpu: "0.020", memory: "0.002"}
idle_multiplier: "0.30"       # jobs on borrowed idle capacity pay 30% of the public rate
# Node specs sold by subscription (docs/subscriptions.md): resources per node and the
# price per node for a month or a year. The year is ~2 months cheaper than 12 monthly
# terms; a yearly term left early is refunded at the monthly price (its discount lost).
subscriptions:
  ml.g2.8xlarge:
    {flavor: gpu/G2, gpus: 8, cpu: 96, memory_gib: 384, monthly: "9800.00", yearly: "98000.00"}
  ml.t4.2xlarge:
    {flavor: gpu/T4, gpus: 2, cpu: 104, memory_gib: 512, monthly: "2100.00", yearly: "21000.00"}
  ml.v100m32.8xlarge:
    flavor: gpu/V100M32
    gpus: 8
    cpu: 96
    memory_gib: 768
    monthly: "13500.00"
    yearly: "135000.00"
"""


def test_demo_book_ships_verbatim_and_parses() -> None:
    assert DEMO.read_text() == DEMO_TEXT
    event = load_price_book(DEMO).to_event()
    assert event.book_id == "demo-2026"
    assert (event.currency, event.scale) == ("USD", 2)
    assert event.effective_from == at("2026-01-01T00:00")
    assert event.rates.public == {
        "gpu/any": Decimal("2.40"),
        "cpu": Decimal("0.048"),
        "memory": Decimal("0.006"),
    }
    assert event.rates.spot["gpu/any"] == Decimal("0.90")
    assert event.idle_multiplier == Decimal("0.30")
    section = load_price_book(DEMO).subscription_event()
    assert section is not None and section.book_id == "demo-2026"
    g2 = section.specs["ml.g2.8xlarge"]
    assert (g2.flavor, g2.gpus, g2.cpu_milli, g2.memory_mib) == ("gpu/G2", 8, 96_000, 393_216)
    assert (g2.monthly, g2.yearly) == (Decimal("9800.00"), Decimal("98000.00"))


def _broken(old: str, new: str) -> str:
    assert old in DEMO_TEXT
    return DEMO_TEXT.replace(old, new)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (DEMO_TEXT + "discount: 0.1\n", "discount: unknown key"),
        (
            _broken('gpu/any: "2.40"', "gpu/any: 2.40"),
            "rates.public: rate for 'gpu/any' must be a quoted",
        ),
        (
            _broken('cpu: "0.020"', 'cpu: "-0.020"'),
            "rates.spot: rate for 'cpu' must be a non-negative",
        ),
        (_broken('cpu: "0.048"', 'cpu: "1e3"'), "rate for 'cpu' must be a non-negative decimal"),
        (_broken('gpu/any: "2.40"', 'tpu/v5: "2.40"'), "unknown resource key 'tpu/v5'"),
        (_broken("currency: USD", "currency: usd"), "currency: must be a 3-letter"),
        (_broken("currency: USD", "currency: DOLLAR"), "currency: must be a 3-letter"),
        (_broken("scale: 2 ", "scale: 7 "), "scale: Input should be less than or equal to 6"),
        (_broken("scale: 2 ", "scale: -1 "), "scale: Input should be greater than or equal to 0"),
        (_broken("scale: 2 ", 'scale: "2"'), "scale: Input should be a valid integer"),
        (
            _broken('"2026-01-01T00:00:00Z"', '"2026-01-01T00:00:00"'),
            "effective_from: must be an ISO-8601",
        ),
        (
            _broken('"2026-01-01T00:00:00Z"', '"next tuesday"'),
            "effective_from: must be an ISO-8601",
        ),
        (
            _broken('idle_multiplier: "0.30"', "idle_multiplier: 0.30"),
            "idle_multiplier: idle_multiplier must be a quoted",
        ),
        (
            _broken("id: demo-2026", "id: demo-2026\nid: other"),
            "not valid YAML: line 2, column 1: duplicate key 'id' (first on line 1)",
        ),
        (_broken("  spot:", "  sopt:"), "rates.sopt: unknown key"),
        ("- just a list\n", "a price book is a YAML mapping"),
        ("id: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_price_book_names_the_field(text: str, fragment: str) -> None:
    with pytest.raises(PriceBookError) as info:
        parse_price_book(text, source="books/x.yaml")
    assert fragment in str(info.value)
    assert str(info.value).startswith("books/x.yaml: ")


def test_missing_fields_are_named() -> None:
    with pytest.raises(PriceBookError, match=r"currency: Field required.*rates: Field required"):
        parse_price_book('id: x\nscale: 2\neffective_from: "2026-01-01T00:00:00Z"\n'
                         'idle_multiplier: "0.3"\n')  # fmt: skip


A100 = "gpu/A100-SXM4-80GB"


def schedule() -> PriceSchedule:
    return PriceSchedule(
        [
            book("b1", "2026-01-01T00:00", {"gpu/any": "2.40", A100: "3.50", "cpu": "0.048"},
                 {"gpu/any": "0.90"}),
            spot(A100, "1.10", "2026-01-10T00:00"),
            spot("gpu/any", "1.20", "2026-01-20T00:00"),
            spot("gpu/any", "1.00", "2026-01-25T00:00"),
            book("b2", "2026-02-01T00:00", {"gpu/any": "3.00", "cpu": "0.050"}, {"gpu/any": "0.80"},
                 idle="0.25"),
        ]
    )  # fmt: skip


def test_book_in_force_and_before_first_book() -> None:
    s = schedule()
    assert s.book_at(at("2026-01-31T23:59")).book_id == "b1"
    assert s.book_at(at("2026-02-01T00:00")).book_id == "b2"
    with pytest.raises(NoApplicableRate, match="no price book"):
        s.rate_at("gpu/any", "public", at("2025-12-31T23:59"))


def test_per_model_key_takes_precedence_over_gpu_any() -> None:
    s = schedule()
    t = at("2026-01-05T00:00")
    assert s.rate_at(A100, "public", t).rate == Decimal("3.50")
    assert s.rate_at(A100, "public", t).key == A100
    assert s.rate_at("gpu/H100", "public", t).rate == Decimal("2.40")
    assert s.rate_at("gpu/H100", "public", t).key == "gpu/any"
    # no A100 spot rate in the book: falls back to gpu/any until A100 gets its own
    assert s.rate_at(A100, "spot", t).rate == Decimal("0.90")
    assert s.rate_at(A100, "spot", at("2026-01-10T00:00")).rate == Decimal("1.10")
    # the gpu/any spot change does not override the A100-specific one
    assert s.rate_at(A100, "spot", at("2026-01-21T00:00")).rate == Decimal("1.10")
    # in the next book the per-model public rate is gone: gpu/any applies
    assert s.rate_at(A100, "public", at("2026-02-02T00:00")).rate == Decimal("3.00")


def test_spot_change_holds_until_next_change_or_book() -> None:
    s = schedule()
    assert s.rate_at("gpu/any", "spot", at("2026-01-19T23:59")).rate == Decimal("0.90")
    applied = s.rate_at("gpu/any", "spot", at("2026-01-20T00:00"))
    assert (applied.rate, applied.source) == (Decimal("1.20"), "spot-change")
    assert s.rate_at("gpu/any", "spot", at("2026-01-25T00:00")).rate == Decimal("1.00")
    assert s.rate_at("gpu/any", "spot", at("2026-02-01T00:00")).rate == Decimal("0.80")
    # and the A100 override of January does not survive the February book either
    assert s.rate_at(A100, "spot", at("2026-02-01T00:00")).rate == Decimal("0.80")


def test_idle_and_quota_rates() -> None:
    s = schedule()
    assert s.rate_at("gpu/any", "idle", at("2026-01-05T00:00")).rate == Decimal("0.72")
    assert s.rate_at("cpu", "idle", at("2026-02-05T00:00")).rate == Decimal("0.0125")
    assert s.rate_at("gpu/any", "quota", at("2026-01-05T00:00")).rate == 0


def test_missing_key_is_an_error_naming_it() -> None:
    with pytest.raises(NoApplicableRate, match="no public rate for 'memory'"):
        schedule().rate_at("memory", "public", at("2026-01-05T00:00"))
    with pytest.raises(NoApplicableRate, match="no spot rate for 'cpu'"):
        schedule().rate_at("cpu", "spot", at("2026-01-05T00:00"))


def test_change_points() -> None:
    s = schedule()
    jan = (at("2026-01-01T00:00"), at("2026-03-01T00:00"))
    assert s.change_points(*jan) == (
        at("2026-01-01T00:00"),
        at("2026-01-10T00:00"),
        at("2026-01-20T00:00"),
        at("2026-01-25T00:00"),
        at("2026-02-01T00:00"),
    )
    assert s.change_points(*jan, "gpu/any", "public") == (
        at("2026-01-01T00:00"),
        at("2026-02-01T00:00"),
    )
    assert s.change_points(*jan, "gpu/any", "spot") == (
        at("2026-01-01T00:00"),
        at("2026-01-20T00:00"),
        at("2026-01-25T00:00"),
        at("2026-02-01T00:00"),
    )
    assert at("2026-01-10T00:00") in s.change_points(*jan, A100, "spot")
    assert s.change_points(*jan, "gpu/any", "quota") == ()
    assert s.change_points(at("2026-01-02T00:00"), at("2026-01-20T00:00")) == (
        at("2026-01-10T00:00"),
    )


def test_one_currency_per_schedule() -> None:
    with pytest.raises(PriceBookError, match="EUR"):
        PriceSchedule([book("a", "2026-01-01T00:00", {"cpu": "1"}),
                       book("b", "2026-02-01T00:00", {"cpu": "1"}, currency="EUR")])  # fmt: skip
    with pytest.raises(PriceBookError, match="spot price change"):
        PriceSchedule([book("a", "2026-01-01T00:00", {"cpu": "1"}),
                       spot("cpu", "1", "2026-01-02T00:00", currency="EUR")])  # fmt: skip


def test_same_instant_later_book_wins() -> None:
    s = PriceSchedule([book("a", "2026-01-01T00:00", {"cpu": "1"}),
                       book("b", "2026-01-01T00:00", {"cpu": "2"})])  # fmt: skip
    assert s.rate_at("cpu", "public", at("2026-01-01T00:00")).book_id == "b"
