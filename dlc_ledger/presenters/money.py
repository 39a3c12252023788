"""Money at the rendering edge: every amount shown carries its currency and scale.

Rows from the read models hold integer minor units (``total_minor: 126721``) and a
``currency``. Two renderings, one per edge:

- a command's (:func:`with_amounts`): for machines (JSON, CSV) each ``<name>_minor``
  gains, beside it, the decimal ``<name>`` (a string there: ``"1267.21"``) and the row a
  ``scale``, so no reader has to know that USD has two decimals; a
  ``<name>_minor_precise`` (sub-minor precision, as posted) gains ``<name>_precise``, its
  exact decimal amount. A table shows people the decimal amount only (``1,267.21``, with
  the currency column), not the minor units;
- the API's (:func:`money_fields`): each ``<name>_minor`` integer stays, with the row's
  ``scale`` and a ``<name>_display`` string for people (``1,267.21 USD``); decimals become
  strings.

A row's scale comes from ``scale_of`` (:func:`projections.billing.currency_scales`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from ledger.money import from_minor, plain_decimal
from projections.billing import ScaleOf

__all__ = ["money_fields", "with_amounts"]

_SUFFIX = "_minor"
_PRECISE = "_minor_precise"


def with_amounts(
    rows: Sequence[Mapping[str, Any]],
    fmt: str,
    scale_of: ScaleOf,
    *,
    currency: str | None = None,
) -> list[dict[str, Any]]:
    """``rows`` with their ``*_minor`` amounts made readable for ``fmt`` (see the module
    docstring). A row's currency is its own ``currency`` column, else ``currency``; a row
    that has neither is left as it is."""
    out = []
    for row in rows:
        cur = row.get("currency") or currency
        if cur is None or not any(k.endswith(_SUFFIX) for k in row):
            out.append(dict(row))
            continue
        scale = scale_of(cur)
        own_currency = "currency" in row
        item: dict[str, Any] = {}
        for key, value in row.items():
            if key.endswith(_SUFFIX) and (value is None or type(value) is int):
                if fmt != "table":
                    item[key] = value
                item[key[: -len(_SUFFIX)]] = None if value is None else from_minor(value, scale)
                if not own_currency and "currency" not in item:  # right after the first amount
                    item["currency"] = cur
                    if fmt != "table":
                        item["scale"] = scale
            elif key.endswith(_PRECISE):
                # sub-minor precision (as posted): for machines, with its decimal amount
                if fmt != "table" and value is not None:
                    # plain decimals, never an exponent ("9.8E+3" is no amount to a reader)
                    precise = Decimal(str(value))
                    item[key] = plain_decimal(precise)
                    item[key[: -len(_PRECISE)] + "_precise"] = plain_decimal(precise.scaleb(-scale))
            elif key == "currency":
                item[key] = cur
                if fmt != "table":
                    item["scale"] = scale
            else:
                item[key] = value
        out.append(item)
    return out


def money_fields(row: Mapping[str, Any], scale_of: ScaleOf) -> dict[str, Any]:
    """``row`` with its amounts as minor units + currency + scale + a display string."""
    currency = row.get("currency")
    out = {k: str(v) if isinstance(v, Decimal) else v for k, v in row.items()}
    if currency is None:
        return out
    scale = scale_of(currency)
    out["scale"] = scale
    for key, value in row.items():
        if key.endswith("_minor") and isinstance(value, int):
            amount = from_minor(value, scale)
            out[key[: -len("_minor")] + "_display"] = f"{amount:,.{scale}f} {currency}"
    return out
