"""The rater and the billing projection on a real store: idempotent, balanced, exact splits."""

from __future__ import annotations

from decimal import Decimal

from dlc_ledger.services.billing import publish_price_book, publish_spot_price, tick
from ledger.store.postgres import PostgresEventStore
from processes.billing.rater import rate
from projections.billing.projection import catch_up_billing
from tests.support.billing import at, book_yaml, demo_book, ended, query, started


def _txn_count(store: PostgresEventStore) -> int:
    rows = query(store, "SELECT count(*) FROM events WHERE type = 'LedgerTransactionPosted'")
    return int(rows[0][0])


def _occupancy_total(store: PostgresEventStore, occ: str) -> dict[str, Decimal]:
    """What was posted for ``occ`` per usage month: minor units at sub-minor precision."""
    catch_up_billing(store)
    rows = query(
        store,
        "SELECT usage_period, sum(amount_minor) FROM billing_transactions "
        "WHERE occupancy_id = :o GROUP BY usage_period ORDER BY 1",
        o=occ,
    )
    return {p: Decimal(a) for p, a in rows}


def test_rerunning_the_rater_posts_nothing_new_and_every_transaction_balances(
    store: PostgresEventStore,
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    store.append(
        [
            started("p1", at("2026-11-01T00:00"), cpu_milli=8000, memory_mib=16384),
            started("p2", at("2026-11-03T06:30"), mode="spot", workspace="ws-b"),
            started("p3", at("2026-11-10T00:00"), mode="idle", mgpu=460),
            ended("p1", at("2026-11-02T12:00")),
        ]
    )
    first = tick(store, at("2026-11-20T00:30"))
    assert first.rated.finals == 1 and first.rated.accrued == 2
    count = _txn_count(store)
    assert count == first.rated.posted > 0
    # the same tick again, the rater alone, and a tick within the same hour: nothing new
    assert tick(store, at("2026-11-20T00:30")).rated.posted == 0
    assert rate(store).posted == 0
    assert tick(store, at("2026-11-20T00:59")).rated.posted == 0
    assert _txn_count(store) == count
    store.append([ended("p2", at("2026-11-25T00:00")), ended("p3", at("2026-12-10T00:00"))])
    tick(store, at("2026-12-02T01:00"))
    tick(store, at("2027-01-05T00:00"))
    catch_up_billing(store)
    unbalanced = query(
        store,
        "SELECT transaction_id, currency, sum(amount_minor) FROM billing_postings "
        "GROUP BY transaction_id, currency HAVING sum(amount_minor) <> 0",
    )
    assert unbalanced == []
    assert query(store, "SELECT count(*) FROM billing_transactions")[0][0] == _txn_count(store)
    invoices = query(store, "SELECT invoice_id, total_minor FROM billing_invoices")
    assert len(invoices) == 3  # ws-a Nov + Dec, ws-b Nov
    for invoice_id, total in invoices:
        lines = query(
            store,
            "SELECT sum(amount_minor) FROM billing_invoice_lines WHERE invoice_id = :i",
            i=invoice_id,
        )
        assert int(lines[0][0]) == total
    # p1: 36 h of 1 GPU at 2.40, 8 cores at 0.048, 16 GiB at 0.006
    # (exact now: 1382.4 + 345.6, where each line used to be rounded to 1382 + 346)
    assert _occupancy_total(store, "p1") == {"2026-11": Decimal("8640") + Decimal("1382.4")
                                             + Decimal("345.6")}  # fmt: skip
    # p3 (idle, 0.46 GPU at 2.40 x 0.30 = 0.3312/h): 504 h in Nov (accrued), 216 h in Dec
    # (exact: 16692.48 and 7153.92 cents; per-line rounding posted 16692 and 7154)
    assert _occupancy_total(store, "p3") == {
        "2026-11": Decimal("16692.48"), "2026-12": Decimal("7153.92")
    }  # fmt: skip


def test_interval_across_a_price_change_and_a_month_boundary_splits_exactly(
    store: PostgresEventStore,
) -> None:
    publish_price_book(store, book_yaml("b1", "2026-01-01T00:00:00Z"), at=at("2026-10-01T00:00"))
    publish_price_book(
        store, book_yaml("b2", "2026-11-15T00:00:00Z", gpu="3.00"), at=at("2026-10-02T00:00")
    )
    store.append([started("x", at("2026-11-10T00:00")), ended("x", at("2026-12-05T00:00"))])
    rate(store)
    # Nov: 120 h at 2.40 + 384 h at 3.00; Dec: 96 h at 3.00
    assert _occupancy_total(store, "x") == {"2026-11": 28800 + 115200, "2026-12": 28800}
    rows = query(
        store,
        "SELECT usage_period, usage FROM billing_usage_lines WHERE job_uid = 'job-x' ORDER BY 1",
    )
    hour = 1000 * 3600 * 10**6
    assert [(p, int(u)) for p, u in rows] == [("2026-11", 504 * hour), ("2026-12", 96 * hour)]


def test_spot_change_mid_run_is_honoured_and_accruals_telescope(
    store: PostgresEventStore,
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    store.append([started("s", at("2026-11-01T00:00"), mode="spot")])
    tick(store, at("2026-11-01T10:00"))
    assert _occupancy_total(store, "s") == {"2026-11": 900}  # 10 h at 0.90
    publish_spot_price(
        store, "gpu/any", __import__("decimal").Decimal("1.50"), at("2026-11-01T05:00")
    )
    tick(store, at("2026-11-01T12:00"))
    assert _occupancy_total(store, "s") == {"2026-11": 450 + 1050}  # 5 h at 0.90, 7 h at 1.50
    store.append([ended("s", at("2026-11-01T20:00"))])
    tick(store, at("2026-11-01T21:00"))
    assert _occupancy_total(store, "s") == {"2026-11": 450 + 2250}


def test_quota_mode_posts_zero_and_still_reports_usage(store: PostgresEventStore) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    store.append(
        [
            started("q", at("2026-11-01T00:00"), mode="quota", cpu_milli=4000, quota="team-a"),
            ended("q", at("2026-11-01T10:00")),
        ]
    )
    tick(store, at("2026-12-02T00:00"))
    catch_up_billing(store)
    rows = query(
        store,
        "SELECT resource, amount_minor, usage FROM billing_usage_lines ORDER BY resource",
    )
    assert [(r, a) for r, a, _ in rows] == [("cpu", 0), ("gpu/any", 0)]
    assert int(rows[1][2]) == 1000 * 10 * 3600 * 10**6
    invoice = query(store, "SELECT total_minor, line_count FROM billing_invoices")
    assert invoice == [(0, 2)]
