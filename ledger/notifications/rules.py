"""A workspace's notification rules as a file: parsed, checked, diffed against the applied.

``notifications apply FILE`` works as ``quotas apply``: the file is the whole list of the
workspaces it names (a rule of those workspaces it leaves out is removed), only the
differences are appended (``NotificationRuleSet`` / ``NotificationRuleRemoved`` on stream
``notification-rule/<workspace>/<name>``), applying it twice stores nothing the second
time. Durations are ``30m``, ``48h``, ``2d`` or seconds. A rule naming an unknown event,
workspace or quota is refused with the known ones listed; a secret is never in a rule,
only the name of the environment variable that holds it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from ledger.errors import Invalid
from ledger.events import NotificationRule, NotificationRuleRemoved, NotificationRuleSet
from ledger.notifications.catalogue import RULE_EVENTS, TIMED

__all__ = [
    "ALL_WORKSPACES",
    "RuleFileError",
    "diff_rules",
    "rule_key",
    "rule_stream",
    "rules_from_document",
]

ALL_WORKSPACES = "*"
_DURATION = re.compile(r"^(\d+)\s*([smhd]?)$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_ENV = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")
_FIELDS = {
    "name",
    "workspace",
    "scope",
    "user",
    "events",
    "filters",
    "target",
    "enabled",
    "waiting_longer_than",
    "running_longer_than",
    "expiring_within_days",
}
_FILTERS = {"quota", "billing_mode", "job_name"}


class RuleFileError(Invalid):
    """A rule file that cannot be applied; the message names the rule and the field."""


def rule_key(rule: NotificationRule) -> tuple[str, str]:
    return rule.workspace, rule.name


def rule_stream(workspace: str, name: str) -> str:
    return f"notification-rule/{workspace}/{name}"


def _seconds(where: str, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    match = _DURATION.match(str(value).strip())
    if not match or int(match.group(1)) <= 0:
        raise RuleFileError(f"{where}: a duration like 30m, 48h or 2d, got {value!r}")
    return int(match.group(1)) * _UNITS[match.group(2)]


def _one(
    index: int,
    raw: Any,
    workspaces: Collection[str],
    quotas: Collection[str],
    admin: bool,
) -> NotificationRule:
    where = f"rules[{index}]"
    if not isinstance(raw, dict):
        raise RuleFileError(f"{where}: a mapping of {', '.join(sorted(_FIELDS))}")
    where = f"rule {raw.get('name', index)!r}"
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise RuleFileError(f"{where}: unknown field(s) {', '.join(unknown)}")
    workspace = raw.get("workspace")
    if workspace == ALL_WORKSPACES:
        if not admin:
            raise RuleFileError(f"{where}: workspace '*' (every workspace) is for an admin")
    elif workspace not in workspaces:
        known = ", ".join(sorted(workspaces)) or "none yet"
        raise RuleFileError(f"{where}: unknown workspace {workspace!r} (known: {known})")
    events = raw.get("events")
    if not isinstance(events, list) or not events:
        raise RuleFileError(f"{where}: events must be a non-empty list")
    bad = [e for e in events if e not in RULE_EVENTS]
    if bad:
        raise RuleFileError(
            f"{where}: unknown event(s) {', '.join(map(str, bad))} "
            f"(known: {', '.join(RULE_EVENTS)})"
        )
    fields: dict[str, Any] = {
        "name": raw.get("name"),
        "workspace": workspace,
        "events": tuple(dict.fromkeys(events)),
    }
    scope = raw.get("scope", "all")
    if scope not in ("all", "mine"):
        raise RuleFileError(f"{where}: scope must be all or mine, got {scope!r}")
    if scope == "mine":
        if not raw.get("user"):
            raise RuleFileError(f"{where}: scope mine needs user: NAME")
        fields["user"] = raw["user"]
    filters = raw.get("filters") or {}
    if not isinstance(filters, dict) or set(filters) - _FILTERS:
        raise RuleFileError(f"{where}: filters may hold {', '.join(sorted(_FILTERS))}")
    if "quota" in filters and filters["quota"] not in quotas:
        known = ", ".join(sorted(quotas)) or "none yet"
        raise RuleFileError(f"{where}: unknown quota {filters['quota']!r} (known: {known})")
    fields.update(filters)
    for event, field in TIMED.items():
        if field in raw:
            value = raw[field]
            fields[field] = (
                _seconds(f"{where}.{field}", value)
                if field != "expiring_within_days"
                else _whole_days(f"{where}.{field}", value)
            )
        if event in events and field not in fields:
            raise RuleFileError(f"{where}: event {event} needs {field}")
    target = raw.get("target")
    if not isinstance(target, dict) or set(target) - {"webhook", "secret_env", "apprise_env"}:
        raise RuleFileError(f"{where}: target is {{webhook, secret_env}} or {{apprise_env}}")
    if bool(target.get("webhook")) == bool(target.get("apprise_env")):
        raise RuleFileError(f"{where}: target needs exactly one of webhook or apprise_env")
    if target.get("webhook"):
        if not re.match(r"^https?://", str(target["webhook"])):
            raise RuleFileError(f"{where}: target.webhook must be an http(s) URL")
        if not target.get("secret_env"):
            raise RuleFileError(
                f"{where}: a webhook needs secret_env, the environment variable holding its "
                "Standard Webhooks secret (whsec_...); secrets are never written in rules"
            )
    for env in ("secret_env", "apprise_env"):
        if target.get(env) is not None and not _ENV.match(str(target[env])):
            raise RuleFileError(f"{where}: target.{env} must name an environment variable")
    fields["target"] = target
    fields["enabled"] = raw.get("enabled", True)
    try:
        return NotificationRule.model_validate(fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise RuleFileError(f"{where}: {loc}: {err['msg']}") from None


def _whole_days(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise RuleFileError(f"{where}: a whole number of days > 0, got {value!r}")
    return value


def rules_from_document(
    raw: Any,
    *,
    workspaces: Collection[str],
    quotas: Collection[str],
    admin: bool = True,
) -> dict[tuple[str, str], NotificationRule]:
    """The rules of a parsed file, by (workspace, name); every problem is a
    :class:`RuleFileError`."""
    if not isinstance(raw, dict) or set(raw) - {"rules"}:
        raise RuleFileError("a rule file is a mapping with one key, rules: [...]")
    items = raw.get("rules") or []
    if not isinstance(items, list):
        raise RuleFileError("rules must be a list")
    out: dict[tuple[str, str], NotificationRule] = {}
    for index, item in enumerate(items):
        rule = _one(index, item, workspaces, quotas, admin)
        if rule_key(rule) in out:
            raise RuleFileError(f"rule {rule.name!r} of {rule.workspace} is defined twice")
        out[rule_key(rule)] = rule
    return out


def diff_rules(
    current: Mapping[tuple[str, str], NotificationRule],
    desired: Mapping[tuple[str, str], NotificationRule],
    workspaces: Iterable[str],
) -> list[NotificationRuleSet | NotificationRuleRemoved]:
    """The events that make ``current`` equal ``desired`` for ``workspaces`` (the file's)."""
    scope = set(workspaces)
    out: list[NotificationRuleSet | NotificationRuleRemoved] = []
    for key, rule in sorted(desired.items()):
        if current.get(key) != rule:
            out.append(NotificationRuleSet(rule=rule))
    for key in sorted(current):
        if key[0] in scope and key not in desired:
            out.append(NotificationRuleRemoved(workspace=key[0], name=key[1]))
    return out
