"""The event centre: notifications queued and their outcomes, rules, secret grants."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    AwareDatetime,
    Field,
    PositiveInt,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from ledger.bounds import (
    Bound,
)
from ledger.envelopes import EventData, event_type
from ledger.events.common import (
    BillingMode,
    LabelValue,
    Name,
    Part,
    drop_none,
)

__all__ = [
    "NotificationDelivered",
    "NotificationFailed",
    "NotificationQueued",
    "NotificationRule",
    "NotificationRuleDisabled",
    "NotificationRuleRemoved",
    "NotificationRuleSet",
    "NotificationSecretGranted",
    "NotificationSecretRevoked",
    "NotificationTarget",
]


@event_type("NotificationQueued")
class NotificationQueued(EventData):
    """A notification to deliver (the outbox). The optional fields are set by the event
    centre's rules (docs/notifications.md) and left out of the payload when unset, so a
    budget's queued notification stored before them hashes as it did."""

    notification_id: str = Name
    target: str
    subject: str
    body: dict[str, str] = {}
    rule: str | None = None  # "<workspace>/<name>"
    event_type: str | None = None  # the rule's event name (JobFailed, JobWaitingTooLong, ...)
    order_key: str | None = None  # delivered in order per key (a job's uid)
    cause_event_id: str | None = None
    occurred_at: AwareDatetime | None = None  # when the fact happened (cluster time)
    payload: dict[str, Any] | None = None  # the webhook body's "data"

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        return drop_none(
            handler,
            self,
            "rule",
            "event_type",
            "order_key",
            "cause_event_id",
            "occurred_at",
            "payload",
        )


@event_type("NotificationDelivered")
class NotificationDelivered(EventData):
    notification_id: str = Name
    attempts: int = Field(ge=1)
    latency_ms: int | None = None  # from the fact's append to the receiver's answer

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        return drop_none(handler, self, "latency_ms")


@event_type("NotificationFailed")
class NotificationFailed(EventData):
    notification_id: str = Name
    attempts: int = Field(ge=1)
    error: str


class NotificationTarget(Part):
    """Where a rule's notifications go: a webhook signed per Standard Webhooks with the
    secret in an environment variable, or an apprise URL held in one. Never a secret."""

    webhook: Annotated[str | None, Bound(2048)] = None
    secret_env: Annotated[str | None, Bound(128)] = None
    apprise_env: Annotated[str | None, Bound(128)] = None


class NotificationRule(Part):
    name: str = Name
    workspace: LabelValue = Name  # "*": every workspace (an admin's rule)
    events: Annotated[tuple[str, ...], Bound(items=32)]
    user: LabelValue | None = None  # scope "mine": only this user's jobs
    quota: LabelValue | None = None
    billing_mode: BillingMode | None = None
    job_name: Annotated[str | None, Bound(253)] = None  # a glob: train-*
    waiting_longer_than: PositiveInt | None = None  # seconds (JobWaitingTooLong)
    running_longer_than: PositiveInt | None = None  # seconds (JobRunningTooLong)
    expiring_within_days: PositiveInt | None = None  # SubscriptionExpiring
    target: NotificationTarget
    enabled: bool = True


@event_type("NotificationRuleSet")
class NotificationRuleSet(EventData):
    """A rule of a workspace's event centre, created or replaced (``notifications apply``),
    in force from the event's ``occurred_at`` (``--effective-at``)."""

    rule: NotificationRule


@event_type("NotificationRuleRemoved")
class NotificationRuleRemoved(EventData):
    workspace: LabelValue = Name
    name: str = Name


@event_type("NotificationRuleDisabled")
class NotificationRuleDisabled(EventData):
    """The sender turned a rule off: its webhook answered ``410 Gone`` (Standard Webhooks:
    the endpoint is gone). Applying the rule again turns it back on."""

    workspace: LabelValue = Name
    name: str = Name
    reason: Annotated[str, Bound(500)]


@event_type("NotificationSecretGranted")
class NotificationSecretGranted(EventData):
    """An admin let a workspace's rules name one environment variable of the sender (a
    webhook secret or an apprise URL); a rule may name no other (docs/notifications.md)."""

    workspace: LabelValue = Name
    variable: Annotated[str, Bound(128)]


@event_type("NotificationSecretRevoked")
class NotificationSecretRevoked(EventData):
    workspace: LabelValue = Name
    variable: Annotated[str, Bound(128)]
