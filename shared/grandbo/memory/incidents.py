"""Incident-closed events: the write-behind of what an incident actually established.

EventBridge event (`source` = `landfall.incidents`, `detail-type` = `IncidentClosed`):

    detail = {
      "tenant_id":   "acme",                       # the organization
      "incident_id": "INC-1042",
      "title":       "Checkout latency",           # the incident's own title (never embedded alone)
      "service":     "checkout-api",               # optional, default service of findings
      "closed_at":   "2026-11-29T10:00:00Z",
      "findings": [                                 # up to 50
        {"finding_id": "f1", "status": "corroborated" | "hypothesis" | "rejected",
         "title": "...", "summary": "...", "service": "...", "tags": ["..."],
         "kind": "durable" | "episodic"}            # optional, durable by default
      ],
      "recalled": [                                 # optional, up to 25
        {"entry_id": "<uuid>", "outcome": "confirmed" | "refuted"}
      ],
      "chatter": [{"author": "...", "text": "..."}] # optional, never stored
    }

Only `corroborated` findings become entries; each is keyed by its incident and finding
ids (`grandbo.memory.domain.idempotency`: no two findings share a key, whatever the ids hold)
so a redelivered event records nothing new. A corroborated finding is durable memory
(a root cause, a mitigation that worked) unless it says `"kind": "episodic"` (a transient
observation), which expires after the organization's episodic lifetime (30 days unless
an admin set another). In the same transaction, the incident's node, its AFFECTS edges
(the incident's service and its corroborated findings' services) and their
CORRELATES_WITH edges go into the topology tier's learned graph
(`grandbo.topology.learned`); an incident with no corroborated finding teaches nothing.

`recalled` names the memory entries the investigation was served and what it made of
them: `confirmed` (the lesson held) or `refuted` (it did not). Each becomes a verdict on
its entry for this incident (`helpful`, `not_helpful`), written by the incident
(`incident-closed:ID`, keyed by incident and entry: recorded once, whatever a redelivery
says), in the same transaction as the findings; an entry the organization does not hold
refuses the event whole (nothing stored), an entry redacted since gets none. These are
trusted outcomes the organization's recalibration weighs twice a query key's verdicts
(`grandbo.memory.domain.recalibration`), with the confidence the retrieval log says
the entry was served with during the incident; the incident channel is one source of the
organization's, whatever incidents its events name (whoever may send incident events may
name any), capped as any other source is.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)

from grandbo.errors import (
    EntryNotFoundError,
    InvalidEventError,
    InvalidInputError,
    invalid_input_from,
)
from grandbo.memory.domain.idempotency import incident_finding_key, incident_recalled_key
from grandbo.memory.domain.models import (
    EntryText,
    Feedback,
    Kind,
    NewEntry,
    Origin,
    ServiceName,
    Verdict,
    WriteContext,
    WriteOutcome,
)
from grandbo.memory.service import MemoryService
from grandbo.moments import plausible_moment
from grandbo.tenancy import require_tenant

INCIDENT_SOURCE = "landfall.incidents"
INCIDENT_CLOSED = "IncidentClosed"
MAX_FINDINGS = 50
# more than an investigation is served and judges (a few queries of five hits)
MAX_RECALLED = 25

_Id = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[\w.:-]+$")]


class FindingStatus(enum.StrEnum):
    CORROBORATED = "corroborated"
    HYPOTHESIS = "hypothesis"
    REJECTED = "rejected"


class Finding(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    finding_id: _Id
    status: FindingStatus
    title: str
    summary: str
    service: ServiceName | None = None
    tags: list[str] = Field(default_factory=list)
    # a corroborated finding is durable unless the incident platform says it is transient
    kind: Kind = Kind.DURABLE


class RecalledOutcome(enum.StrEnum):
    CONFIRMED = "confirmed"
    REFUTED = "refuted"


# what the verdict an outcome records says
_VERDICT_OF = {
    RecalledOutcome.CONFIRMED: Verdict.HELPFUL,
    RecalledOutcome.REFUTED: Verdict.NOT_HELPFUL,
}


class RecalledEntry(BaseModel):
    """A memory entry the investigation was served, and whether it held."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    entry_id: UUID
    outcome: RecalledOutcome


def _once_each(recalled: list[RecalledEntry]) -> list[RecalledEntry]:
    seen: set[UUID] = set()
    for item in recalled:
        if item.entry_id in seen:
            raise ValueError(f"names entry {item.entry_id} twice: one outcome per entry")
        seen.add(item.entry_id)
    return recalled


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    author: str | None = None
    text: str | None = None


def _closed_at(value: datetime) -> datetime:
    """The moment the incident closed, in UTC (one without a zone is read as UTC), in
    the one plausible range (`grandbo.moments`): before, 0001-01-01 made the learned
    nodes valid since year 1, so every `as_of` replay included them."""
    return plausible_moment(value, datetime.now(UTC))


class IncidentClosed(BaseModel):
    """The `detail` of an incident-closed event."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    tenant_id: str
    incident_id: _Id
    title: str = Field(max_length=300)
    service: ServiceName | None = None
    closed_at: Annotated[datetime, AfterValidator(_closed_at)]
    findings: list[Finding] = Field(default_factory=list, max_length=MAX_FINDINGS)
    recalled: Annotated[list[RecalledEntry], AfterValidator(_once_each)] = Field(
        default_factory=list, max_length=MAX_RECALLED
    )
    chatter: list[ChatMessage] = Field(default_factory=list)


def parse_incident_closed(detail: Any) -> IncidentClosed:
    try:
        incident = IncidentClosed.model_validate(detail)
        require_tenant(incident.tenant_id)
    except ValidationError as exc:
        problem = invalid_input_from(exc)
        raise InvalidEventError(f"IncidentClosed.{problem.field}: {problem.message}") from exc
    except InvalidInputError as exc:
        raise InvalidEventError(f"IncidentClosed.{exc.field}: {exc.message}") from exc
    return incident


def corroborated_entries(incident: IncidentClosed) -> list[tuple[str, NewEntry]]:
    """(idempotency key, entry) for each corroborated finding; everything else is dropped.

    Findings are validated as entries *before* anything is written, so one malformed
    finding rejects the event whole instead of storing part of it.
    """
    entries = []
    for finding in incident.findings:
        if finding.status is not FindingStatus.CORROBORATED:
            continue
        try:
            text = EntryText(
                title=finding.title,
                summary=finding.summary,
                service=finding.service or incident.service,
                tags=finding.tags,
            )
        except ValidationError as exc:
            problem = invalid_input_from(exc)
            raise InvalidEventError(
                f"IncidentClosed.findings[{finding.finding_id}].{problem.field}: {problem.message}"
            ) from exc
        entry = NewEntry(
            **text.model_dump(),
            origin=Origin.INCIDENT,
            incident_id=incident.incident_id,
            kind=finding.kind,
        )
        entries.append((incident_finding_key(incident.incident_id, finding.finding_id), entry))
    return entries


def recalled_verdicts(incident: IncidentClosed) -> list[tuple[UUID, Feedback, WriteContext]]:
    """The verdict each recalled entry's outcome records, by the incident, under its key."""
    actor = f"incident-closed:{incident.incident_id}"
    return [
        (
            item.entry_id,
            Feedback(verdict=_VERDICT_OF[item.outcome], incident_id=incident.incident_id),
            WriteContext(
                actor=actor,
                idempotency_key=incident_recalled_key(incident.incident_id, str(item.entry_id)),
            ),
        )
        for item in incident.recalled
    ]


def record_incident(service: MemoryService, incident: IncidentClosed) -> list[WriteOutcome]:
    """Write the incident's corroborated findings and its recalled entries' outcomes in
    one transaction; redelivery is a no-op. A recalled entry the organization does not
    hold is InvalidEventError naming it (`recalled.N.entry_id`), nothing stored."""
    actor = f"incident-closed:{incident.incident_id}"
    try:
        return service.record_entries(
            incident.tenant_id,
            [
                (entry, WriteContext(actor=actor, idempotency_key=key))
                for key, entry in corroborated_entries(incident)
            ],
            # the symptom's service is affected too, even where the findings name the cause's
            incident_services=[incident.service] if incident.service else [],
            incident_at=incident.closed_at,
            verdicts=recalled_verdicts(incident),
        )
    except EntryNotFoundError as exc:
        index = next(
            (i for i, item in enumerate(incident.recalled) if item.entry_id == exc.entry_id), 0
        )
        raise InvalidEventError(
            f"IncidentClosed.recalled.{index}.entry_id: organization {incident.tenant_id} "
            f"holds no entry {exc.entry_id}; nothing of the incident was stored"
        ) from exc
