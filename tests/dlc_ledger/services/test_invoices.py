"""The invoice use cases called directly: plain values in, dataclasses out, errors by kind."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from dlc_ledger.services.billing import issue_credit_note, publish_price_book, tick, void_invoice
from dlc_ledger.services.clocks import billing_instant
from dlc_ledger.services.errors import Conflict, InvalidRequest, NotFound
from ledger.accounts import rounding_transaction_id
from ledger.store.postgres import PostgresEventStore
from processes.billing.rater import RATER_SOURCE
from projections.billing import CREDIT_NOTES_ACCOUNT, find_invoice, invoice_detail
from projections.billing.projection import catch_up_billing
from tests.support.billing import at, demo_book, ended, started

WHO = "api/finance-bot"


def _issued(store: PostgresEventStore, hours: float = 10) -> str:
    """One issued November invoice for ws-a: ``hours`` of one GPU at 2.40 USD/h."""
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    start = at("2026-11-05T00:00")
    store.append([started("a", start), ended("a", start + timedelta(hours=hours))])
    (invoice_id,) = tick(store, at("2026-12-02T00:00")).invoices
    return invoice_id


def _sources(store: PostgresEventStore, stream_prefix: str) -> list[tuple[str, str]]:
    with store.engine.connect() as conn:
        return [
            (r.type, r.source)
            for r in conn.execute(
                text("SELECT type, source FROM events WHERE stream LIKE :s ORDER BY position"),
                {"s": stream_prefix + "%"},
            )
        ]


def test_detail_is_header_lines_with_jobs_and_notes(store: PostgresEventStore) -> None:
    invoice_id = _issued(store)
    found = find_invoice(store, invoice_id)
    assert (found.workspace, found.period, found.status) == ("ws-a", "2026-11", "issued")
    assert (found.total_minor, found.credited_minor, found.currency) == (2400, 0, "USD")
    issue_credit_note(store, invoice_id, "1.00", "sla", principal=WHO)
    detail = invoice_detail(store, invoice_id)
    assert detail.header["invoice_id"] == invoice_id and "position" not in detail.header
    assert detail.header["credited_minor"] == 100
    (line,) = detail.lines
    assert line["amount_minor"] == 2400
    assert [j["job_uid"] for j in line["jobs"]] == ["job-a"]
    assert [(n["amount_minor"], n["reason"]) for n in detail.credit_notes] == [(100, "sla")]
    with pytest.raises(NotFound, match="no invoice 'nope'"):
        invoice_detail(store, "nope")


def test_void_reverses_the_rounding_and_names_the_principal(store: PostgresEventStore) -> None:
    # 10 h 0 min 1 s at 2.40/h is 2400.0666… minor units: the invoice posts a rounding
    invoice_id = _issued(store, hours=10 + 1 / 3600)
    catch_up_billing(store)
    with store.engine.connect() as conn:
        rounding = conn.execute(
            text("SELECT count(*) FROM billing_transactions WHERE transaction_id = :t"),
            {"t": rounding_transaction_id(invoice_id)},
        ).scalar_one()
    assert rounding == 1
    with pytest.raises(InvalidRequest, match="needs a --reason"):
        void_invoice(store, invoice_id, "  ", principal=WHO)

    done = void_invoice(store, invoice_id, "wrong address", principal=WHO)
    assert done.invoice_id == invoice_id and done.rounding_reversed
    assert find_invoice(store, invoice_id).status == "voided"
    with store.engine.connect() as conn:
        appended = conn.execute(
            text("SELECT type, source, data FROM events ORDER BY position DESC LIMIT 2")
        ).all()
    # the void and the reversal of the rounding, appended together
    assert [(r.type, r.source) for r in reversed(appended)] == [
        ("InvoiceVoided", WHO),
        ("LedgerTransactionPosted", RATER_SOURCE),
    ]
    assert done.event_id in appended[0].data["cause_event_ids"]
    with pytest.raises(Conflict, match="already voided"):
        void_invoice(store, invoice_id, "again", principal=WHO)
    with pytest.raises(Conflict, match="is voided: credit notes need an issued one"):
        issue_credit_note(store, invoice_id, "1.00", "late", principal=WHO)
    with pytest.raises(NotFound):
        void_invoice(store, "nope", "x", principal=WHO)


def test_a_void_without_rounding_reverses_nothing(store: PostgresEventStore) -> None:
    invoice_id = _issued(store)  # exactly 2400 minor units: nothing to round
    before = store.head_position()
    assert not void_invoice(store, invoice_id, "test", principal=WHO).rounding_reversed
    assert store.head_position() == before + 1


def test_credit_notes_exact_idempotent_and_bounded(store: PostgresEventStore) -> None:
    invoice_id = _issued(store)
    with pytest.raises(InvalidRequest, match=r"more decimals than USD allows \(scale 2\)"):
        issue_credit_note(store, invoice_id, "1.005", "x", principal=WHO)
    with pytest.raises(InvalidRequest, match="must be positive"):
        issue_credit_note(store, invoice_id, "0", "x", principal=WHO)
    with pytest.raises(InvalidRequest, match="not a decimal number"):
        issue_credit_note(store, invoice_id, "five", "x", principal=WHO)

    first = issue_credit_note(store, invoice_id, "5.00", "goodwill", principal=WHO)
    again = issue_credit_note(store, invoice_id, "5", "goodwill", principal=WHO)
    assert first.created and not again.created and again.note == first.note
    assert (first.note.amount_minor, first.note.currency) == (500, "USD")

    keyed = issue_credit_note(
        store, invoice_id, "1.50", "sla", principal=WHO, idempotency_key="ticket-42"
    )
    with pytest.raises(Conflict, match="idempotency key 'ticket-42' was used for credit note"):
        issue_credit_note(
            store, invoice_id, "2.50", "sla", principal=WHO, idempotency_key="ticket-42"
        )
    with pytest.raises(InvalidRequest, match="must not be empty"):
        issue_credit_note(store, invoice_id, "1.00", "x", principal=WHO, idempotency_key=" ")
    with pytest.raises(Conflict, match=r"exceeds what is left on the invoice \(17.50 USD\)"):
        issue_credit_note(store, invoice_id, "17.51", "too much", principal=WHO)

    assert find_invoice(store, invoice_id).credited_minor == 650
    assert _sources(store, "invoice/").count(("CreditNoteIssued", WHO)) == 2
    with store.engine.connect() as conn:
        credited = conn.execute(
            text("SELECT sum(amount_minor) FROM billing_postings WHERE account = :a"),
            {"a": CREDIT_NOTES_ACCOUNT},
        ).scalar_one()
    assert credited == 650
    assert keyed.note.credit_note_id != first.note.credit_note_id


def test_billing_instant_refuses_a_future_until_unless_forced(store: PostgresEventStore) -> None:
    store.append([started("a", at("2026-11-05T00:00"))])
    observed = at("2026-11-05T00:00")
    with pytest.raises(Conflict, match="is beyond the latest cluster time observed"):
        billing_instant(store, observed + timedelta(seconds=1))
    forced = billing_instant(store, observed + timedelta(days=30), force=True)
    assert forced.at == observed + timedelta(days=30) and not forced.replayed
    assert billing_instant(store, observed).at == observed
    # no --until, the wall clock a year ahead: a replayed history, billed to its end
    replayed = billing_instant(store, None, wall=observed + timedelta(days=365))
    assert (replayed.at, replayed.replayed) == (observed, True)


def test_a_void_carries_its_credit_notes_to_the_reissue(store: PostgresEventStore) -> None:
    # the audit's case: credited in full, voided, re-issued, credited in full again
    first = _issued(store)  # 24.00 USD
    issue_credit_note(store, first, "24.00", "outage", principal=WHO)
    void_invoice(store, first, "wrong usage", principal=WHO)
    (second,) = tick(store, at("2026-12-03T00:00")).invoices
    assert second != first and find_invoice(store, second).total_minor == 2400
    with pytest.raises(Conflict, match=r"left on the invoice \(0.00 USD\); 24.00 USD credited"):
        issue_credit_note(store, second, "24.00", "outage again", principal=WHO)
    with pytest.raises(Conflict, match="of it on voided revisions of 2026-11"):
        issue_credit_note(store, second, "0.01", "a cent", principal=WHO)
    with store.engine.connect() as conn:
        credited = conn.execute(
            text("SELECT sum(amount_minor) FROM billing_postings WHERE account = :a"),
            {"a": CREDIT_NOTES_ACCOUNT},
        ).scalar_one()
    assert credited == 2400  # the period credited once, never beyond its total
