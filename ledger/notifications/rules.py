"""A workspace's notification rules as a file: parsed, checked, diffed against the applied.

``notifications apply FILE`` works as ``quotas apply``: the file is the whole list of the
workspaces it names (a rule of those workspaces it leaves out is removed), only the
differences are appended (``NotificationRuleSet`` / ``NotificationRuleRemoved`` on stream
``notification-rule/<workspace>/<name>``), applying it twice stores nothing the second
time. Durations are ``30m``, ``48h``, ``2d`` or seconds, at most 366 days. A rule naming
an unknown event, workspace or quota is refused with the known ones listed; a secret is
never in a rule, only the name of the environment variable that holds it, and only a
variable an admin granted to the rule's workspace. Every refusal names the rule and the
field (``rule 'x' of ws-a.target.webhook: ...``): a file is a tenant's input.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from ledger.errors import Invalid
from ledger.events import NotificationRule, NotificationRuleRemoved, NotificationRuleSet
from ledger.notifications.catalogue import RULE_EVENTS, TIMED
from ledger.notifications.grants import is_variable_name
from ledger.notifications.targets import AllowList, TargetRefused, check_webhook_url

__all__ = [
    "ALL_WORKSPACES",
    "MAX_EXPIRING_DAYS",
    "MAX_LIMIT_SECONDS",
    "MAX_RULES",
    "RuleFileError",
    "check_rule_name",
    "diff_rules",
    "rule_key",
    "rule_stream",
    "rules_from_document",
]

ALL_WORKSPACES = "*"
#: the most rules one file (or one apply) may set
MAX_RULES = 1000
#: the longest time limit a rule may set (a year): a limit beyond it would never fire, and
#: an unbounded one overflowed the matcher's instant arithmetic
MAX_LIMIT_SECONDS = 366 * 86_400
MAX_EXPIRING_DAYS = 366
_DURATION = re.compile(r"^(\d{1,9})\s*([smhd]?)$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
#: rule names as quota names: DNS-label characters, so a name is safe in a path and a stream
_NAME = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$")
_BILLING_MODES = ("quota", "public", "spot", "idle")
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


def check_rule_name(name: Any, where: str = "name") -> str:
    """A rule's name: lower-case letters, digits, ``.``, ``_`` and ``-``, at most 63."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise RuleFileError(
            f"{where}: a rule name is 1-63 lower-case letters, digits, '.', '_' or '-', "
            f"starting and ending with a letter or digit; got {_shown(name)}"
        )
    return name


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _text(where: str, value: Any, limit: int) -> str:
    if not isinstance(value, str) or not value:
        raise RuleFileError(f"{where}: a non-empty string, got {_shown(value)}")
    if len(value) > limit:
        raise RuleFileError(f"{where}: at most {limit} characters, got {len(value)}")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise RuleFileError(f"{where}: contains a control character")
    return value


def _seconds(where: str, value: Any) -> int:
    if isinstance(value, bool):
        raise RuleFileError(f"{where}: a duration like 30m, 48h or 2d, got {value!r}")
    if isinstance(value, int):
        seconds = value
    else:
        match = _DURATION.match(str(value).strip()[:32])
        if not match:
            raise RuleFileError(f"{where}: a duration like 30m, 48h or 2d, got {_shown(value)}")
        seconds = int(match.group(1)) * _UNITS[match.group(2)]
    if not 0 < seconds <= MAX_LIMIT_SECONDS:
        raise RuleFileError(
            f"{where}: a duration from 1s to 366d ({MAX_LIMIT_SECONDS} s), got {_shown(value)}"
        )
    return seconds


def _whole_days(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_EXPIRING_DAYS:
        raise RuleFileError(
            f"{where}: a whole number of days from 1 to {MAX_EXPIRING_DAYS}, got {_shown(value)}"
        )
    return value


def _events(where: str, events: Any) -> tuple[str, ...]:
    if not isinstance(events, list) or not events:
        raise RuleFileError(f"{where}.events: a non-empty list of event names")
    bad = [e for e in events if not isinstance(e, str) or e not in RULE_EVENTS]
    if bad:
        raise RuleFileError(
            f"{where}.events: unknown event(s) {', '.join(_shown(b) for b in bad[:5])} "
            f"(known: {', '.join(RULE_EVENTS)})"
        )
    return tuple(dict.fromkeys(events))


def _filters(where: str, raw: Any, quotas: Collection[str]) -> dict[str, str]:
    filters = raw if raw is not None else {}
    if not isinstance(filters, dict) or set(filters) - _FILTERS:
        raise RuleFileError(f"{where}.filters: a mapping of {', '.join(sorted(_FILTERS))}")
    out: dict[str, str] = {}
    for key, value in filters.items():
        out[key] = _text(f"{where}.filters.{key}", value, 253 if key == "job_name" else 63)
    if "quota" in out and out["quota"] not in quotas:
        known = ", ".join(sorted(quotas)[:20]) or "none yet"
        raise RuleFileError(
            f"{where}.filters.quota: unknown quota {out['quota']!r} (known: {known})"
        )
    if "billing_mode" in out and out["billing_mode"] not in _BILLING_MODES:
        raise RuleFileError(f"{where}.filters.billing_mode: one of {', '.join(_BILLING_MODES)}")
    return out


def _target(
    where: str,
    target: Any,
    workspace: str,
    grants: Mapping[str, Collection[str]],
    allow: AllowList,
) -> dict[str, str]:
    if not isinstance(target, dict) or set(target) - {"webhook", "secret_env", "apprise_env"}:
        raise RuleFileError(f"{where}.target: {{webhook, secret_env}} or {{apprise_env}}")
    if bool(target.get("webhook")) == bool(target.get("apprise_env")):
        raise RuleFileError(f"{where}.target: exactly one of webhook or apprise_env")
    out: dict[str, str] = {}
    if target.get("webhook"):
        url = _text(f"{where}.target.webhook", target["webhook"], 2048)
        try:
            check_webhook_url(url, allow)
        except TargetRefused as exc:
            raise RuleFileError(f"{where}.target.webhook: {exc}") from None
        out["webhook"] = url
        if not target.get("secret_env"):
            raise RuleFileError(
                f"{where}.target.secret_env: a webhook needs secret_env, the environment "
                "variable holding its Standard Webhooks secret (whsec_...); secrets are never "
                "written in rules"
            )
    for env in ("secret_env", "apprise_env"):
        if target.get(env) is None:
            continue
        variable = target[env]
        if not is_variable_name(variable):
            raise RuleFileError(
                f"{where}.target.{env}: an environment variable name (A-Z, 0-9, _), "
                f"got {_shown(variable)}"
            )
        if variable not in grants.get(workspace, ()):
            raise RuleFileError(
                f"{where}.target.{env}: {variable} is not granted to workspace {workspace} "
                f"(an admin grants it: notifications secrets grant {workspace} {variable})"
            )
        out[env] = variable
    return out


def _one(
    index: int,
    raw: Any,
    workspaces: Collection[str],
    quotas: Collection[str],
    admin: bool,
    grants: Mapping[str, Collection[str]],
    allow: AllowList,
) -> NotificationRule:
    where = f"rules[{index}]"
    if not isinstance(raw, dict):
        raise RuleFileError(f"{where}: a mapping of {', '.join(sorted(_FIELDS))}")
    name = check_rule_name(raw.get("name"), f"{where}.name")
    where = f"rule {name!r}"
    unknown = sorted(str(k) for k in set(raw) - _FIELDS)
    if unknown:
        raise RuleFileError(f"{where}: unknown field(s) {', '.join(unknown)}")
    workspace = raw.get("workspace")
    if workspace == ALL_WORKSPACES:
        if not admin:
            raise RuleFileError(f"{where}.workspace: '*' (every workspace) is for an admin")
    elif not isinstance(workspace, str) or workspace not in workspaces:
        known = ", ".join(sorted(workspaces)[:20]) or "none yet"
        raise RuleFileError(
            f"{where}.workspace: unknown workspace {_shown(workspace)} (known: {known})"
        )
    where = f"rule {name!r} of {workspace}"
    events = _events(where, raw.get("events"))
    fields: dict[str, Any] = {"name": name, "workspace": workspace, "events": events}
    scope = raw.get("scope", "all")
    if scope not in ("all", "mine"):
        raise RuleFileError(f"{where}.scope: all or mine, got {_shown(scope)}")
    if scope == "mine":
        if not raw.get("user"):
            raise RuleFileError(f"{where}.user: scope mine needs user: NAME")
        fields["user"] = _text(f"{where}.user", raw["user"], 63)
    fields.update(_filters(where, raw.get("filters"), quotas))
    for event, field in TIMED.items():
        if field in raw:
            value = raw[field]
            fields[field] = (
                _seconds(f"{where}.{field}", value)
                if field != "expiring_within_days"
                else _whole_days(f"{where}.{field}", value)
            )
        if event in events and field not in fields:
            raise RuleFileError(f"{where}.{field}: event {event} needs it")
    fields["target"] = _target(where, raw.get("target"), workspace, grants, allow)
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        raise RuleFileError(f"{where}.enabled: true or false, got {_shown(enabled)}")
    fields["enabled"] = enabled
    try:
        return NotificationRule.model_validate(fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise RuleFileError(f"{where}.{loc}: {err['msg']}") from None


def rules_from_document(
    raw: Any,
    *,
    workspaces: Collection[str],
    quotas: Collection[str],
    grants: Mapping[str, Collection[str]],
    admin: bool = True,
    allow: AllowList | None = None,
) -> dict[tuple[str, str], NotificationRule]:
    """The rules of a parsed file, by (workspace, name); every problem is a
    :class:`RuleFileError`. ``grants``: the variables each workspace's rules may name;
    ``allow``: the operator's allow-list of webhook targets inside its network."""
    if not isinstance(raw, dict) or set(raw) - {"rules"}:
        raise RuleFileError("a rule file is a mapping with one key, rules: [...]")
    items = raw.get("rules") or []
    if not isinstance(items, list):
        raise RuleFileError("rules must be a list")
    if len(items) > MAX_RULES:
        raise RuleFileError(f"rules: at most {MAX_RULES} in one file, got {len(items)}")
    out: dict[tuple[str, str], NotificationRule] = {}
    for index, item in enumerate(items):
        rule = _one(index, item, workspaces, quotas, admin, grants, allow or AllowList())
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
