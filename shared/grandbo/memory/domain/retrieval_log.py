"""The retrieval log's model: what the agent asked during an incident and what memory told
it (issue 36, point 3). Ids, ranks and confidences only, never an entry's text."""

from __future__ import annotations

import hashlib
from datetime import date, datetime
from typing import Protocol
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, computed_field

from grandbo.errors import InvalidInputError
from grandbo.memory.domain.models import MemoryQueryResult
from grandbo.text.tags import tag_words

# how long an organization's retrievals are kept (the sweeper forgets older ones)
RETRIEVAL_DAYS = 30
# the log's caller column's bound (migration 0032): a longer caller (a person's long
# address) is logged as its digest, so its questions are kept, and counted as one caller
MAX_CALLER_CHARS = 200
# the most an organization's log holds of one day (UTC) unless it set its own: a busy
# agent's day (about 14 questions a minute all day), far below a flood's (one token at 5.6
# rows a second wrote 480,000 a day, issue 44); what it drops is counted per day
RETRIEVAL_ROWS_PER_DAY = 20_000
# the latest questions the incidents page aggregates: a bounded read whatever the log holds
RECENT_QUESTIONS = 5_000


def logged_caller(caller: str) -> str:
    """The caller as the log keeps it: itself, or past MAX_CALLER_CHARS its SHA-256."""
    if len(caller) <= MAX_CALLER_CHARS:
        return caller
    return "sha256:" + hashlib.sha256(caller.encode()).hexdigest()


class RetrievalHit(BaseModel):
    model_config = ConfigDict(frozen=True)

    entry_id: UUID
    rank: int = Field(ge=1)
    confidence: float | None = None
    # the model that scored it (a recalibration is fit only from its own model's hits)
    model: str | None = None


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
        """Memory served no hit: by the rule the agent was answered by (the confidence
        floor in force, the regime's model), not a second threshold of the log's own. A
        served hit answered the question, and a verdict can only confirm one that was."""
        return not self.hits

    @computed_field  # type: ignore[prop-decorator]
    @property
    def incomplete(self) -> bool:
        """Unanswered by a search that could not look everywhere (meaning search down,
        entries not embedded yet): not a sign that the lesson is missing."""
        return not self.hits and not self.no_precedent


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
            caller=logged_caller(caller),
            incident_id=incident_id,
            topic=topic,
            hits=[
                RetrievalHit.model_construct(
                    entry_id=hit.entry_id,
                    rank=rank,
                    confidence=hit.confidence,
                    model=hit.why.confidence_model,
                )
                for rank, hit in enumerate(result.hits, start=1)
            ],
            latency_ms=latency_ms,
            no_precedent=result.metadata.no_precedent,
        )


class HitEntry(BaseModel):
    """A hit's entry as it stands when the log is read (the log holds its id only): a
    redacted entry shows as such, with no text."""

    model_config = ConfigDict(frozen=True)

    title: str | None
    status: str


class VerdictRemoval(BaseModel):
    """An admin's removal of a verdict (an event of its own): who, when and why. A removed
    verdict is counted no more and never fit again."""

    model_config = ConfigDict(frozen=True)

    actor: str
    removed_at: datetime
    reason: str


class IncidentVerdict(BaseModel):
    """A verdict given on an entry during the incident, with its note, and its removal if
    an admin removed it."""

    model_config = ConfigDict(frozen=True)

    verdict_id: int = Field(description="its event's id: what an admin removes it by")
    entry_id: UUID
    verdict: str
    note: str | None
    actor: str
    recorded_at: datetime
    removal: VerdictRemoval | None = Field(
        default=None, description="who removed it, when and why (null: it stands)"
    )


class RemovedVerdict(BaseModel):
    """A verdict an admin removed, as the removal answers it."""

    model_config = ConfigDict(frozen=True)

    verdict_id: int
    entry_id: UUID
    verdict: str
    actor: str = Field(description="who gave the verdict")
    incident_id: str | None
    removal: VerdictRemoval
    applied: bool = Field(description="false: it was removed before, as `removal` says")


class TopicGroup(BaseModel):
    """Questions of similar topics (sharing at least half the words of the shorter one with
    the group's first): one missing lesson, likely."""

    model_config = ConfigDict(frozen=True)

    words: list[str] = Field(description="the words every question of the group shares")
    retrieval_ids: list[UUID]
    incidents: list[str]


# how much of the shorter topic's words two questions share to be grouped
GROUP_OVERLAP = 0.5


def group_by_topic(retrievals: list[Retrieval]) -> list[TopicGroup]:
    """Questions grouped by the words of their topics (stemmed, without stop words), each
    with the first question of a group that shares at least GROUP_OVERLAP of the shorter
    topic's words; the largest groups first, then the latest asked."""
    groups: list[tuple[list[str], set[str], list[Retrieval]]] = []
    for retrieval in retrievals:
        words = tag_words(retrieval.topic)
        stems = set(words)
        for _, first, members in groups:
            shorter = min(len(first), len(stems)) or 1
            if len(first & stems) / shorter >= GROUP_OVERLAP:
                members.append(retrieval)
                break
        else:
            groups.append((list(words.values()), stems, [retrieval]))
    answer = []
    for shown, _, members in groups:
        shared = set.intersection(*(set(tag_words(m.topic)) for m in members))
        first_words = tag_words(members[0].topic)
        answer.append(
            TopicGroup(
                words=[first_words[stem] for stem in first_words if stem in shared] or shown,
                retrieval_ids=[m.retrieval_id for m in members],
                incidents=list(dict.fromkeys(m.incident_id for m in members if m.incident_id)),
            )
        )
    return sorted(answer, key=lambda group: -len(group.retrieval_ids))


class RetrievalPage(BaseModel):
    model_config = ConfigDict(frozen=True)

    retrievals: list[Retrieval]
    next: str | None = Field(description="`before` for the next page (None: the last)")
    entries: dict[UUID, HitEntry] = Field(
        default_factory=dict, description="each hit's entry as it stands now (title, status)"
    )
    verdicts: list[IncidentVerdict] = Field(
        default_factory=list, description="the incident's verdicts (with `incident_id` only)"
    )
    groups: list[TopicGroup] = Field(
        default_factory=list,
        description="the page's questions grouped by similar topics (with `unanswered` only)",
    )


class IncidentAsked(BaseModel):
    """An incident whose agent asked memory: how often, how often in vain, and when."""

    model_config = ConfigDict(frozen=True)

    incident_id: str
    asked: int
    unanswered: int
    first_at: datetime
    last_at: datetime


class LogRemoval(BaseModel):
    """A question an admin removed from the log: who, when, why and its topic's digest."""

    model_config = ConfigDict(frozen=True)

    retrieval_id: UUID
    topic_sha256: str
    actor: str
    reason: str
    removed_at: datetime


class LoggedDay(BaseModel):
    """One day (UTC) of an organization's log: the rows kept, those its bounds dropped (the
    organization's day, a caller's share of it), and those that could not be written (the
    writer out of reach: counted once it was back, migration 0038)."""

    model_config = ConfigDict(frozen=True)

    day: date
    logged: int
    dropped: int
    unlogged: int = 0


class CallerDay(BaseModel):
    """One caller's day (UTC) in the organization's log: its questions kept and those
    dropped past its share of the day (a quarter of the organization's bound)."""

    model_config = ConfigDict(frozen=True)

    day: date
    caller: str
    logged: int
    dropped: int


class RetrievalReads(Protocol):
    def retrievals(
        self,
        tenant_id: str,
        *,
        incident_id: str | None = None,
        unanswered: bool = False,
        before: tuple[datetime, UUID] | None = None,
        limit: int = 50,
    ) -> list[Retrieval]: ...

    def hit_entries(self, tenant_id: str, ids: list[UUID]) -> dict[UUID, HitEntry]: ...

    def incident_verdicts(self, tenant_id: str, incident_id: str) -> list[IncidentVerdict]: ...


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
    """A page of the log, newest first; with `unanswered`, only the questions memory
    served no hit for (read through their own index: a bounded read whatever the log
    holds)."""
    position = None if before is None else _position(before)
    chosen = log.retrievals(
        tenant_id,
        incident_id=incident_id,
        unanswered=unanswered,
        before=position,
        limit=limit + 1,
    )
    cursor = _cursor(chosen[limit - 1]) if len(chosen) > limit else None
    chosen = chosen[:limit]
    ids = list({hit.entry_id for r in chosen for hit in r.hits})
    return RetrievalPage(
        retrievals=chosen,
        next=cursor,
        entries=log.hit_entries(tenant_id, ids),
        verdicts=[] if incident_id is None else log.incident_verdicts(tenant_id, incident_id),
        groups=group_by_topic(chosen) if unanswered else [],
    )
