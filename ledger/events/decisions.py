"""The dispatcher's decisions: admissions and preemptions, with the state that justified them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    AwareDatetime,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from ledger.envelopes import EventData, event_type
from ledger.events.common import (
    Name,
    Part,
    drop_none,
)

__all__ = ["AdmissionDecided", "PreemptionDecided", "Victim"]


class Victim(Part):
    job_uid: str
    quota: str
    reason: str
    #: the victim's pending episode it was chosen in (its preemptions so far)
    attempt: int = Field(default=0, ge=0)


@event_type("AdmissionDecided")
class AdmissionDecided(EventData):
    """The dispatcher's decision about a pending job: ``admit`` (it is resumed next), or
    ``pending`` with a tiered ``reason`` (stored when the reason changes, not per cycle);
    or about a running one: ``stop`` with reason ``MaxRunTimeExceeded`` (it ran past its
    declared maximum: it is stopped for good, ``state["run"]`` says ``ran`` and ``max``);
    or ``refuse`` about a notebook that does not fit at start (``reason``: why; it is
    not queued: docs/dispatch.md, "Services and notebooks").
    ``attempt`` is the job's pending episode (its preemptions so far), ``state`` the quota
    figures it was decided on (``docs/dispatch.md``, "The live loop")."""

    job_uid: str = Name
    quota: str
    outcome: Literal["admit", "preempt", "pending", "stop", "refuse"]
    borrowing: bool = False
    state: dict[str, dict[str, int]] = {}
    reason: str | None = None
    estimated_start: AwareDatetime | None = None
    attempt: int = Field(default=0, ge=0)
    #: 1-based places in its quota's queue and its whole tree (pending decisions)
    position: int | None = None
    cohort_position: int | None = None
    #: the estimated start as a range (docs/dispatch.md, "Why?"): the low and high
    #: percentile starts; left out when unset, so decisions stored before them hash as
    #: they did (``high`` unset with a ``low``: no upper bound)
    estimated_start_low: AwareDatetime | None = None
    estimated_start_high: AwareDatetime | None = None

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        return drop_none(handler, self, "estimated_start_low", "estimated_start_high")


@event_type("PreemptionDecided")
class PreemptionDecided(EventData):
    preemptor: str = Name
    victims: tuple[Victim, ...]
    reason: str
    state: dict[str, dict[str, int]] = {}
    #: the preemptor's quota and pending episode (its preemptions so far)
    quota: str | None = None
    attempt: int = Field(default=0, ge=0)
