"""The retrieval log's model: what the agent asked during an incident and what memory told
it (issue 36, point 3). Ids, ranks and confidences only, never an entry's text."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, computed_field

from grandbo.errors import InvalidInputError
from grandbo.memory.models import MemoryQueryResult

# how long an organization's retrievals are kept (the sweeper forgets older ones)
RETRIEVAL_DAYS = 30
# a retrieval whose best hit is under this, or that has none, is one memory could not
# answer (the curators' to-do list)
LOW_CONFIDENCE = 0.5


class RetrievalHit(BaseModel):
    model_config = ConfigDict(frozen=True)

    entry_id: UUID
    rank: int = Field(ge=1)
    confidence: float | None = None


class _Asked(BaseModel):
    """A question and its answer, as the log keeps them."""

    model_config = ConfigDict(frozen=True)

    at: datetime  # when it was asked
    caller: str
    incident_id: str | None
    topic: str
    hits: list[RetrievalHit]
    latency_ms: float
    no_precedent: bool


class Retrieval(_Asked):
    """One query_org_memory, as it was asked and answered."""

    retrieval_id: UUID

    @computed_field  # type: ignore[prop-decorator]
    @property
    def unanswered(self) -> bool:
        """No hit, or none whose confidence reaches LOW_CONFIDENCE."""
        best = max((h.confidence or 0.0 for h in self.hits), default=0.0)
        return not self.hits or best < LOW_CONFIDENCE


class RetrievalRecord(_Asked):
    """What the query path hands to the log (the server gives it its id)."""

    tenant_id: str

    @classmethod
    def of(
        cls,
        tenant_id: str,
        caller: str,
        incident_id: str | None,
        topic: str,
        result: MemoryQueryResult,
        latency_ms: float,
        asked_at: datetime,
    ) -> RetrievalRecord:
        # built on the answer's path, from values the answer's own models validated
        return cls.model_construct(
            tenant_id=tenant_id,
            at=asked_at,
            caller=caller,
            incident_id=incident_id,
            topic=topic,
            hits=[
                RetrievalHit.model_construct(
                    entry_id=hit.entry_id, rank=rank, confidence=hit.confidence
                )
                for rank, hit in enumerate(result.hits, start=1)
            ],
            latency_ms=latency_ms,
            no_precedent=result.metadata.no_precedent,
        )


class RetrievalPage(BaseModel):
    model_config = ConfigDict(frozen=True)

    retrievals: list[Retrieval]
    next: str | None = Field(description="`before` for the next page (None: the last)")


class RetrievalReads(Protocol):
    def retrievals(
        self,
        tenant_id: str,
        *,
        incident_id: str | None = None,
        before: tuple[datetime, UUID] | None = None,
        limit: int = 50,
    ) -> list[Retrieval]: ...


def _cursor(retrieval: Retrieval) -> str:
    return f"{retrieval.at.isoformat()}|{retrieval.retrieval_id}"


def _position(cursor: str) -> tuple[datetime, UUID]:
    """A `next` cursor read back: InvalidInputError naming `before` if it is none."""
    at, _, retrieval_id = cursor.partition("|")
    try:
        moment = datetime.fromisoformat(at)
        if moment.tzinfo is None:
            raise ValueError("no time zone")
        return moment, UUID(retrieval_id)
    except ValueError as exc:
        raise InvalidInputError("before", f"not a cursor of this log: {exc}") from None


def retrieval_page(
    log: RetrievalReads,
    tenant_id: str,
    *,
    incident_id: str | None = None,
    unanswered: bool = False,
    before: str | None = None,
    limit: int = 50,
) -> RetrievalPage:
    """A page of the log, newest first; with `unanswered`, only the questions memory could
    not answer, read from up to five times as many retrievals."""
    asked = min(1000, limit * 5) if unanswered else limit
    position = None if before is None else _position(before)
    scanned = log.retrievals(tenant_id, incident_id=incident_id, before=position, limit=asked)
    chosen = [r for r in scanned if r.unanswered] if unanswered else scanned
    chosen = chosen[:limit]
    if len(chosen) == limit and chosen:
        cursor: str | None = _cursor(chosen[-1])
    elif len(scanned) == asked and scanned:
        cursor = _cursor(scanned[-1])
    else:
        cursor = None
    return RetrievalPage(retrievals=chosen, next=cursor)
