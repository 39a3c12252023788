"""Bounds of a new fact: how large a quantity, how long a string, how early or late an instant.

A fact the product accepts must fit every read model and report built from it: a sum of
its quantities must fit PostgreSQL's ``bigint``, an amount in minor units derived from a
price must stay a JSON-safe integer, a string must fit a B-tree index row
(2,704 bytes), an instant must survive conversion to UTC and a month's arithmetic, and
every string must be storable text (no NUL, no lone surrogate). The catalogue declares a
field's bound with a :class:`Bound` marker in its annotation; :func:`check_bounds` enforces
the marks (and the defaults below for unmarked fields) on *new* facts only — at the wire
(``envelope_from_wire``) and wherever the product builds one (``make_envelope``). Reading a
stored event never checks them, so events stored before a bound existed stay readable.

The figures, with their reasons, are in ``docs/wire-format.md`` (Bounds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal, get_origin
from unicodedata import category

from pydantic import BaseModel

from ledger.errors import Invalid

__all__ = [
    "EARLIEST",
    "LATEST",
    "MAX_CPU_MILLI",
    "MAX_DECIMAL_PLACES",
    "MAX_FAIR_SHARING_WEIGHT",
    "MAX_FLAVOR",
    "MAX_IDLE_MULTIPLIER",
    "MAX_INT",
    "MAX_LABEL_VALUE",
    "MAX_MEMORY_MIB",
    "MAX_MGPU",
    "MAX_NAME",
    "MAX_NODES",
    "MAX_NODE_GPUS",
    "MAX_NODE_MEMORY_MIB",
    "MAX_NODE_PRICE_MINOR",
    "MAX_PRIORITY",
    "MAX_QUOTA",
    "MAX_RATED_QUANTITY",
    "MAX_RATE_MINOR",
    "MAX_REPLICAS",
    "MAX_REPLICA_SPECS",
    "MAX_SUBSCRIBED_NODES",
    "MAX_TEXT",
    "MIN_PRIORITY",
    "USAGE_MONTH_US",
    "Bound",
    "OutOfBounds",
    "check_bounds",
    "check_decimal",
    "check_free_text",
    "check_instant",
    "check_name",
    "check_text",
]

#: Kubernetes object names (DNS subdomain) and qualified names.
MAX_NAME = 253
#: Kubernetes label values and namespace names: workspace, quota and user come from them.
MAX_LABEL_VALUE = 63
#: ``gpu/`` and a label value (``nvidia.com/gpu.product``).
MAX_FLAVOR = len("gpu/") + MAX_LABEL_VALUE
#: Free text (reasons, memos, descriptions) and any string without a bound of its own.
MAX_TEXT = 4096
#: GPUs of one node (8 is common, 16 the largest boards; x4 margin); a pod lives on one node.
MAX_NODE_GPUS = 64
MAX_MGPU = MAX_NODE_GPUS * 1000
#: CPU of one node or pod in milli-cores (the largest hosts have ~2,000 threads).
MAX_CPU_MILLI = 3072 * 1000
#: Memory of one pod in MiB: 3 TiB (GPU nodes have 1-2 TiB). With the CPU bound it keeps a
#: month of one pod's rated usage (units x microseconds) within int64: see USAGE_MONTH_US.
MAX_MEMORY_MIB = 3 * 2**20
#: Memory of one node in MiB: 64 TiB (the largest hosts have 24-32 TiB).
MAX_NODE_MEMORY_MIB = 64 * 2**20
#: Microseconds of the longest month: a rating transaction's usage covers at most one.
USAGE_MONTH_US = 31 * 86_400 * 10**6
#: Pods of one replica spec (the largest training jobs run a few thousand pods).
MAX_REPLICAS = 10_000
#: Replica specs of one job (Kubeflow jobs have at most four kinds of replica; x2 margin).
MAX_REPLICA_SPECS = 8
#: Nodes of one cluster (Kubernetes' documented limit): a quota cannot hold more.
MAX_NODES = 5_000
#: One quota's guaranteed or maximum amount of a resource: a whole cluster's largest unit.
MAX_QUOTA = MAX_NODES * MAX_NODE_MEMORY_MIB
#: Job priority: Kubernetes priorities are int32.
MIN_PRIORITY, MAX_PRIORITY = -(2**31), 2**31 - 1
#: Any other integer (money in minor units, counts): the JSON-safe range. Also the bound of
#: any other decimal (a posting's amount in minor units, an invoice line's quantity).
MAX_INT = 2**53 - 1
#: Nodes of one subscription order (``SubscriptionPurchased.nodes``).
MAX_SUBSCRIBED_NODES = 100_000
#: A node's price per term (monthly, yearly, a term's unit price), in minor units at the
#: fact's scale: an order of the most nodes at it stays within MAX_INT minor units. At
#: scale 2 (USD) that is 900,719,925.47 a node-term, at scale 6 90,071.992547.
MAX_NODE_PRICE_MINOR = MAX_INT // MAX_SUBSCRIBED_NODES
#: Billing units (GPU-, core-, GiB-hours) of one rating transaction, either sign: its
#: usage (at most int64 units x microseconds) over the smallest unit (1,000 units, one
#: hour). One pod's longest month at its bounds is 2,285,568 core- or GiB-hours.
MAX_RATED_QUANTITY = -(-(2**63 - 1) // (1000 * 3600 * 10**6))
#: A rate per unit-hour (a price book's, a spot price, a rating's), in minor units at the
#: fact's scale (0 when the fact has none): a rating transaction of the most units at it
#: stays within MAX_INT minor units. At scale 2: 35,156,247.09 a unit-hour, at scale 6
#: 3,515.624709.
MAX_RATE_MINOR = MAX_INT // MAX_RATED_QUANTITY
#: A price book's idle multiplier: idle capacity is sold at a fraction of the public rate;
#: x10 leaves room for a premium without letting a typo multiply every idle charge.
MAX_IDLE_MULTIPLIER = 10
#: A quota's fair-sharing weight (Kueue's): shares are divided by it, and a ratio beyond a
#: million between two quotas orders nothing differently.
MAX_FAIR_SHARING_WEIGHT = 1_000_000
#: Places after the point of any decimal: a rating's quantity carries 40 significant
#: digits (the smallest, one unit-microsecond, has 52 places); more only bloats the JSON.
MAX_DECIMAL_PLACES = 64
#: Instants of facts: from the Unix epoch to 2200 (exclusive), far from datetime's edges.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)


class OutOfBounds(Invalid):
    """A value outside its bound; the message names the field."""


@dataclass(frozen=True, slots=True)
class Bound:
    """The bound of a field, in its annotation: ``Annotated[int, Bound(MAX_MGPU)]``.

    For an integer or a decimal ``min <= value <= max``; for a string ``len(value) <=
    max``; for a tuple ``items`` caps its length and ``max``/``min`` apply to its
    elements; for a mapping they apply to its values (keys are names). ``scaled``: the
    decimal is an amount of currency units and the bounds are in minor units at the
    scale of the nearest fact holding it that has a ``scale`` (0 when none has):
    ``min <= value x 10**scale <= max``. Every decimal is finite and has at most
    :data:`MAX_DECIMAL_PLACES` places; one without a bound lies in ``[-MAX_INT, MAX_INT]``.
    """

    max: int = MAX_INT
    min: int = 0
    items: int | None = None
    scaled: bool = False


def check_text(value: str, where: str, limit: int = MAX_TEXT) -> None:
    """``value`` is at most ``limit`` characters of storable text (no NUL, valid UTF-8)."""
    if len(value) > limit:
        raise OutOfBounds(f"{where}: {len(value)} characters, at most {limit}")
    if "\x00" in value:
        raise OutOfBounds(f"{where}: contains a NUL character")
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError as exc:
            raise OutOfBounds(f"{where}: not valid UTF-8 ({exc.reason})") from None


#: Unicode categories no typed name may hold: control (C0, DEL, C1), format (bidi
#: overrides, zero-width), surrogates, line and paragraph separators. Such a character
#: rewrites a terminal or a log line, or makes two names look alike.
_UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
#: what free text may hold besides printable characters
_TEXT_WHITESPACE = frozenset("\t\n")


def _control(value: str, allowed: frozenset[str] = frozenset()) -> tuple[int, str] | None:
    """The first control character of ``value`` (index, character), None without one."""
    if value.isprintable():  # the common case; isprintable is also False for odd spaces
        return None
    for index, char in enumerate(value):
        if char not in allowed and category(char) in _UNPRINTABLE:
            return index, char
    return None


def check_name(value: str, where: str, limit: int = MAX_LABEL_VALUE) -> None:
    """A name a request or a file introduces (a workspace, a resource group, a spec, an
    idempotency key, a token's name): 1 to ``limit`` characters of storable text, no
    control or format character, no space at either end. The one check of a write's
    names, in the API and the CLI alike (docs/api.md, "Limits")."""
    check_text(value, where, limit)
    if not value.strip():
        raise OutOfBounds(f"{where}: must not be empty")
    if value != value.strip():
        raise OutOfBounds(f"{where}: {value!r} starts or ends with white space")
    found = _control(value)
    if found is not None:
        index, char = found
        raise OutOfBounds(
            f"{where}: control character {char!r} (U+{ord(char):04X}) at position {index}"
        )


def check_free_text(value: str, where: str, limit: int = MAX_TEXT) -> None:
    """Free text a request stores (a reason, a memo): at most ``limit`` characters of
    storable text, tabs and line breaks allowed, no other control or format character."""
    check_text(value, where, limit)
    found = _control(value, _TEXT_WHITESPACE)
    if found is not None:
        index, char = found
        raise OutOfBounds(
            f"{where}: control character {char!r} (U+{ord(char):04X}) at position {index}"
        )


def check_instant(value: datetime, where: str) -> None:
    """``value`` lies in [EARLIEST, LATEST)."""
    try:
        inside = EARLIEST <= value < LATEST
    except OverflowError:  # pragma: no cover - comparison is exact, kept for safety
        inside = False
    if not inside:
        raise OutOfBounds(f"{where}: {value.isoformat()} is outside [1970-01-01, 2200-01-01)")


# per model class: (field, kind, bound, low, high); kind 1 a string, 2 an integer, 3 nothing
# to check (a literal or a flag), 4 a decimal, 0 other
_Plan = tuple[tuple[str, int, "Bound | None", int, int], ...]
_PLANS: dict[type[BaseModel], _Plan] = {}
_STR_TYPES = (str, str | None)
_DECIMAL_TYPES = (Decimal, Decimal | None)


def _plan(cls: type[BaseModel]) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        rows = []
        for name, info in cls.model_fields.items():
            bound = next((m for m in info.metadata if isinstance(m, Bound)), None)
            if info.annotation in _STR_TYPES:
                rows.append((name, 1, bound, 0, MAX_TEXT if bound is None else bound.max))
            elif info.annotation is bool or get_origin(info.annotation) is Literal:
                rows.append((name, 3, bound, 0, 0))
            elif info.annotation is int:
                low, high = (-MAX_INT, MAX_INT) if bound is None else (bound.min, bound.max)
                rows.append((name, 2, bound, low, high))
            elif info.annotation in _DECIMAL_TYPES:
                rows.append((name, 4, bound, 0, 0))
            else:
                rows.append((name, 0, bound, 0, 0))
        plan = _PLANS[cls] = tuple(rows)
    return plan


def check_bounds(model: BaseModel, where: str = "", *, scale: int = 0) -> None:
    """Raise :class:`OutOfBounds` if any field of ``model`` (recursively) is out of bounds.

    ``scale``: the minor-unit scale of the fact holding ``model``, for its ``scaled``
    decimals (a model with an integer ``scale`` field sets its own)."""
    # on ingest's hot path: strings and integers are checked inline, the rest generically
    values = model.__dict__
    own = values.get("scale")
    if type(own) is int:
        scale = own
    for name, kind, bound, low, high in _plan(type(model)):
        value = values[name]
        if kind == 1:
            if value is not None and (len(value) > high or "\x00" in value or not value.isascii()):
                check_text(value, f"{where}{name}", high)
        elif kind == 2:
            if not low <= value <= high:
                raise OutOfBounds(f"{where}{name}: {value} is outside [{low}, {high}]")
        elif kind == 4:
            if value is not None:
                check_decimal(value, f"{where}{name}", bound, scale)
        elif kind == 0:
            _check(value, bound, f"{where}{name}", scale)


def check_decimal(value: Decimal, where: str, bound: Bound | None = None, scale: int = 0) -> None:
    """``value`` is finite, has at most :data:`MAX_DECIMAL_PLACES` places and lies within
    ``bound`` (see :class:`Bound`; none: ``[-MAX_INT, MAX_INT]``)."""
    if not value.is_finite():
        raise OutOfBounds(f"{where}: {value} is not a finite number")
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)  # a finite decimal's
    if -exponent > MAX_DECIMAL_PLACES:
        raise OutOfBounds(f"{where}: {-exponent} decimal places, at most {MAX_DECIMAL_PLACES}")
    low, high = (-MAX_INT, MAX_INT) if bound is None else (bound.min, bound.max)
    if bound is not None and bound.scaled and scale:
        # exact: a bound has at most 16 digits, well within the context's precision
        lowest = Decimal(low).scaleb(-scale) if low else Decimal(0)
        highest = Decimal(high).scaleb(-scale)
        if not lowest <= value <= highest:
            raise OutOfBounds(
                f"{where}: {value} is outside [{lowest}, {highest}] "
                f"({low} to {high} minor units at scale {scale})"
            )
    elif not low <= value <= high:
        raise OutOfBounds(f"{where}: {value} is outside [{low}, {high}]")


def _check(value: Any, bound: Bound | None, where: str, scale: int = 0) -> None:
    if value is None or value is True or value is False:
        return
    if isinstance(value, str):
        check_text(value, where, MAX_TEXT if bound is None else bound.max)
    elif isinstance(value, int):
        low, high = (-MAX_INT, MAX_INT) if bound is None else (bound.min, bound.max)
        if not low <= value <= high:
            raise OutOfBounds(f"{where}: {value} is outside [{low}, {high}]")
    elif isinstance(value, Decimal):
        check_decimal(value, where, bound, scale)
    elif isinstance(value, datetime):
        check_instant(value, where)
    elif isinstance(value, BaseModel):
        check_bounds(value, f"{where}.", scale=scale)
    elif isinstance(value, tuple | list):
        if bound is not None and bound.items is not None and len(value) > bound.items:
            raise OutOfBounds(f"{where}: {len(value)} items, at most {bound.items}")
        for i, item in enumerate(value):
            _check(item, bound, f"{where}[{i}]", scale)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_text(str(key), f"{where} key", MAX_NAME)
            _check(item, bound, f"{where}[{key!r}]", scale)
