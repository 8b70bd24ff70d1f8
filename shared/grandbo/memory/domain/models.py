"""Domain models: memory entries, their write commands, embed jobs and query results."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from grandbo.memory.domain.content import missing_content
from grandbo.memory.domain.fusion import FUSION
from grandbo.memory.domain.redaction_receipt import RedactionReceipt
from grandbo.text.rules import MAX_SERVICE_CHARS, SERVICE_NAME_PATTERN, reject_unsafe_text
from grandbo.text.tags import given_tags, written_tags

# an incident's id, wherever it is stored: on an entry, a verdict, a retrieval
IncidentId = Annotated[
    str, StringConstraints(min_length=1, max_length=200), AfterValidator(reject_unsafe_text)
]

MAX_TITLE_CHARS = 300
MAX_SUMMARY_CHARS = 20_000
MAX_EXPLICIT_TAGS = 50
MAX_ACTOR_CHARS = 200
# namespaced and escaped (grandbo.memory.domain.idempotency): two 200-character ids, or a
# 255-character caller key, fit
MAX_IDEMPOTENCY_KEY_CHARS = 1_300
MAX_REASON_CHARS = 2_000
# a verdict's note says why in a sentence or two; the log is append-only, so a note is
# kept for ever (issue 24: 2,411 notes of 2,000 characters were written in 20 s)
MAX_FEEDBACK_NOTE_CHARS = 500
# How long an episodic entry is served unless its organization says otherwise (issue 14)
DEFAULT_EPISODIC_TTL_DAYS = 30
MAX_EPISODIC_TTL_DAYS = 3650


class Origin(enum.StrEnum):
    INCIDENT = "incident"
    ADMIN = "admin"
    CORRECTION = "correction"


class Kind(enum.StrEnum):
    """Durable: a corroborated root cause, a mitigation that worked (kept until retired).
    Episodic: a transient observation ("deploy 4812 rolled back"), served until it expires."""

    DURABLE = "durable"
    EPISODIC = "episodic"


# what a redacted entry's title and summary say instead of its text
REDACTED_TEXT = "[redacted]"


class EntryStatus(enum.StrEnum):
    ACTIVE = "active"
    RETIRED = "retired"
    SUPERSEDED = "superseded"
    MERGED = "merged"  # a recurrence of `merged_into`: not served, its text kept
    REDACTED = "redacted"  # its text removed for good: a tombstone, never served


class EventType(enum.StrEnum):
    CREATED = "entry_created"
    CORRECTED = "entry_corrected"
    RETIRED = "entry_retired"
    SUPERSEDED = "entry_superseded"
    FEEDBACK = "feedback_recorded"
    PROMOTED = "entry_promoted"
    MERGED = "entry_merged"  # recorded as a recurrence of another entry
    SPLIT = "entry_split"  # an admin split a merged entry back out (never merged again)
    MERGE_POLICY = "merge_policy_set"  # an admin marked an entry never-merge, or not
    REDACTED = "entry_redacted"  # its text removed from the entry and from every event
    FEEDBACK_REMOVED = "feedback_removed"  # an admin removed a verdict (who, when, why)


class Verdict(enum.StrEnum):
    """What an investigation found an entry to be worth, once it was over."""

    HELPFUL = "helpful"
    NOT_HELPFUL = "not_helpful"
    MISLEADING = "misleading"


ServiceName = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True,
        min_length=1,
        max_length=MAX_SERVICE_CHARS,
        pattern=SERVICE_NAME_PATTERN,
    ),
]


class _Command(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class EntryText(_Command):
    """The citable text of an entry: what was learned, in words an investigator can verify."""

    title: Annotated[str, StringConstraints(min_length=3, max_length=MAX_TITLE_CHARS)]
    summary: Annotated[str, StringConstraints(min_length=10, max_length=MAX_SUMMARY_CHARS)]
    service: ServiceName | None = None
    tags: list[Annotated[str, StringConstraints(min_length=1, max_length=64)]] = Field(
        default_factory=list, max_length=MAX_EXPLICIT_TAGS
    )

    @field_validator("title", "summary")
    @classmethod
    def _safe_text(cls, value: str) -> str:
        return reject_unsafe_text(value)

    @field_validator("tags")
    @classmethod
    def _safe_tags(cls, value: list[str]) -> list[str]:
        """Kept as written (trimmed, a repeat in another case left out): the lexical index
        tokenizes them, what people read and correct is what they wrote."""
        for tag in value:
            if "," in tag:  # the console's field and the CLI's list separate tags by commas
                raise ValueError(f"a tag holds no comma: {tag!r} (give two tags instead)")
            if any(line in tag for line in "\n\r\u2028\u2029"):
                raise ValueError(f"a tag is one line: {tag!r}")
        return written_tags(reject_unsafe_text(tag) for tag in value)

    @field_validator("summary")
    @classmethod
    def _informative(cls, value: str, info: ValidationInfo) -> str:
        """Thin entries are refused (`grandbo.memory.domain.content`), named at `summary`."""
        problem = missing_content(info.data.get("title", ""), value)
        if problem is not None:
            raise PydanticCustomError("thin_entry", problem)
        return value


class NewEntry(EntryText):
    """A command to create an entry, from an incident's corroborated finding or an admin."""

    origin: Origin = Origin.ADMIN
    incident_id: IncidentId | None = None
    # durable unless said otherwise, from every origin (README: episodic memory)
    kind: Kind = Kind.DURABLE

    @field_validator("origin")
    @classmethod
    def _not_correction(cls, value: Origin) -> Origin:
        if value is Origin.CORRECTION:
            raise ValueError("a new entry's origin is 'incident' or 'admin'")
        return value


class WriteContext(_Command):
    """Who or what caused a write, and the key that makes its redelivery a no-op."""

    actor: Annotated[str, StringConstraints(min_length=1, max_length=MAX_ACTOR_CHARS)]
    idempotency_key: Annotated[
        str, StringConstraints(min_length=1, max_length=MAX_IDEMPOTENCY_KEY_CHARS)
    ]

    @field_validator("actor", "idempotency_key")
    @classmethod
    def _safe_text(cls, value: str) -> str:
        return reject_unsafe_text(value)


class Feedback(_Command):
    """Beacon's (or a person's) verdict on an entry, after the investigation it served.

    `confidence` (the hit's as the caller says it was served) is accepted, checked and
    kept in the event as the API has always taken it, and read by nothing: the
    organization's recalibration is fit from the confidence the retrieval log says the
    server served (`grandbo.memory.domain.recalibration`), never a caller's."""

    verdict: Verdict
    incident_id: IncidentId
    note: Annotated[str, StringConstraints(max_length=MAX_FEEDBACK_NOTE_CHARS)] | None = None
    confidence: Annotated[StrictFloat, Field(ge=0.0, le=1.0, allow_inf_nan=False)] | None = None

    @field_validator("note")
    @classmethod
    def _safe_text(cls, value: str | None) -> str | None:
        return None if value is None else reject_unsafe_text(value)


class FeedbackRate(BaseModel):
    """How many verdicts one caller may record in a window (the rest: 429)."""

    model_config = ConfigDict(frozen=True)

    limit: int
    window_s: int


class FeedbackCounts(BaseModel):
    """How often investigations found the entry helpful, not helpful, misleading."""

    model_config = ConfigDict(frozen=True)

    helpful: int = 0
    not_helpful: int = 0
    misleading: int = 0


class MemoryEntry(BaseModel):
    """One entry of an organization's memory lake, as the projection holds it."""

    model_config = ConfigDict(frozen=True)

    tenant_id: str
    entry_id: UUID
    title: str
    summary: str
    tags: list[str] = Field(
        description="the tags the entry was given, as they were written (its own words "
        "are searched without being listed here)"
    )
    #: the lexical index's tags (stems of the text and of `tags`): matched, never shown
    index_tags: list[str] = Field(default_factory=list, exclude=True)
    #: read from a row stored before migration 0041 the backfill has not filled yet: `tags`
    #: are the stems it was given, not words (set by `_tags_from_before_0041`)
    tags_unfilled: bool = Field(default=False, exclude=True)
    service: str | None
    origin: Origin
    status: EntryStatus
    revision: int
    incident_id: str | None
    superseded_by: UUID | None
    created_at: datetime
    updated_at: datetime
    embed_rev: str | None
    embedded_revision: int | None
    helpful_count: int = 0
    not_helpful_count: int = 0
    misleading_count: int = 0
    kind: Kind = Kind.DURABLE
    expires_at: datetime | None = None
    merged_into: UUID | None = None
    never_merge: bool = False
    seen_count: int = 1
    last_seen_at: datetime | None = None
    seen_in_incidents: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _tags_from_before_0041(cls, data: Any) -> Any:
        """A row not yet given its tags as written (`given_tags` NULL: stored before
        migration 0041, until the backfill fills it) shows the stems it was given."""
        if isinstance(data, dict) and "tags" in data and data["tags"] is None:
            index = data.get("index_tags") or []
            service = data.get("service")
            return {
                **data,
                "tags": given_tags(data.get("title", ""), data.get("summary", ""), service, index),
                "tags_unfilled": True,
            }
        return data

    @property
    def feedback(self) -> FeedbackCounts:
        return FeedbackCounts(
            helpful=self.helpful_count,
            not_helpful=self.not_helpful_count,
            misleading=self.misleading_count,
        )


class RecurrencesRehomed(BaseModel):
    """Where the recurrences of an entry went when it was retired, superseded or
    corrected to another lesson: `moved` to the successor, or `resurfaced` (the oldest is
    an active entry again and the others its recurrences), under `entry_id`; or, after a
    correction whose words still agree with every recurrence's, `kept`."""

    model_config = ConfigDict(frozen=True)

    how: Literal["moved", "resurfaced", "kept"]
    entry_id: UUID
    count: int  # how many left the entry
    kept: int = 0  # after a correction: those whose words still agree with the new text


class WriteOutcome(BaseModel):
    """What a write did: the entry as it now stands, and whether this call changed anything."""

    model_config = ConfigDict(frozen=True)

    entry: MemoryEntry
    applied: bool
    #: None when no embed job was due (a no-op or a retirement), else whether the job
    #: reached the queue; False is logged and counted, and the sweeper repairs it.
    embed_enqueued: bool | None = None
    #: a retirement or a correction of an entry that had recurrences: where they went
    recurrences: RecurrencesRehomed | None = None


class RemovedPayload(BaseModel):
    """One event whose payload a redaction replaced: the SHA-256 of what it held (of its
    JSON as the database renders it), so the removal itself can be proven."""

    model_config = ConfigDict(frozen=True)

    entry_id: UUID
    event_id: int
    event_type: str
    sha256: str


class Tombstone(BaseModel):
    """What is left of a redacted entry: that it was, when, by whom and why."""

    model_config = ConfigDict(frozen=True)

    entry_id: UUID
    redacted: bool = True
    redacted_at: datetime
    redacted_by: str
    reason: str
    created_at: datetime


class RedactionOutcome(BaseModel):
    """A redaction: the tombstone, every entry whose text went with it (the entry and
    the recurrences redacted with it), every payload removed, and where the recurrences
    went if the admin kept them."""

    model_config = ConfigDict(frozen=True)

    tombstone: Tombstone
    applied: bool
    entries: list[UUID]
    removed: list[RemovedPayload]
    recurrences: RecurrencesRehomed | None = None
    # where the text and its spellings were searched, found, removed, left (issue 52)
    receipt: RedactionReceipt | None = None
    # the text is gone from every read at once; its bytes stay in the table files until
    # they are rewritten (`grandbo rewrite-redacted`, grandbo.memory.repository.table_rewrite)
    rewrite_pending: bool = True
    rewrite_note: str = (
        "The text is gone from every read. Its bytes stay in the database's table files "
        "until they are rewritten: run `grandbo rewrite-redacted --tenant ORG` as the "
        "schema owner in a quiet hour (it locks the organization's entries partition and "
        "the tag tables while each is rewritten). The write-ahead log and backups keep "
        "them until they expire (docs/OPERATIONS.md, Redacting an entry)."
    )


class TopologyChange(BaseModel):
    """One thing the topology says changed about the service a lesson is about."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["retired", "renamed", "dependency_gone", "dependency_renamed"]
    service: str = Field(description="the lesson's service")
    since: datetime = Field(description="when the topology changed")
    replaced_by: str | None = Field(
        default=None,
        description="renamed: the service's new name; dependency_renamed: the dependency's",
    )
    dependency: str | None = Field(
        default=None,
        description="dependency_gone and dependency_renamed: the dependency the lesson names",
    )


class Staleness(BaseModel):
    """The lesson was written about a system that has changed since (or by `as_of`)."""

    model_config = ConfigDict(frozen=True)

    changes: list[TopologyChange]
    note: str = Field(description="the changes in words, for a reader or a model")


class EmbedJob(BaseModel):
    """Embed one entry's text as of one revision, under its own tenant."""

    model_config = ConfigDict(frozen=True)

    tenant_id: str
    entry_id: UUID
    revision: int


class MatchExplanation(BaseModel):
    """Why an entry was returned: its place in each leg and the fused score."""

    model_config = ConfigDict(frozen=True)

    lexical_rank: int | None
    lexical_score: float | None
    shared_tags: list[str]
    # each shared tag in the topic's own words ("timeouts" for the stem `timeout`)
    shared_words: list[str] = Field(default_factory=list)
    vector_rank: int | None
    vector_distance: float | None
    fused_score: float
    # the fused score's two terms (they sum to it): how much each leg gave
    lexical_part: float = 0.0
    vector_part: float = 0.0
    confidence_model: str | None = Field(
        default=None,
        description="the model that scored this hit's confidence: the provider's, or the "
        "keyword model where meaning search could not see it (`metadata.searched`)",
    )


class MemoryHit(BaseModel):
    """One returned entry: a hint to verify with live tools, never ground truth."""

    model_config = ConfigDict(frozen=True)

    entry_id: UUID
    # optional only so that a client reads an older server's answer (always set here)
    confidence: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="the estimated probability that this hit is relevant to the topic, "
        "comparable across queries (a logistic model of the search's own signals, fit per "
        "embedding model on held-out queries: docs/EVAL.md); the fused score in `why` only "
        "orders candidates within one answer",
    )
    title: str
    summary: str
    tags: list[str] = Field(description="the tags the lesson was given, as written")
    #: the lexical index's tags (for the staleness check's names): matched, never shown
    index_tags: list[str] = Field(default_factory=list, exclude=True)
    service: str | None
    origin: Origin
    revision: int
    incident_id: str | None
    created_at: datetime
    updated_at: datetime
    age_days: float
    kind: Kind = Kind.DURABLE
    expires_at: datetime | None = None
    recurrences: int = Field(
        default=1, description="how many times this lesson was recorded (1: once)"
    )
    # optional only so that a client reads an older server's answer (always set here)
    last_seen_at: datetime | None = Field(
        default=None, description="when this lesson was last recorded"
    )
    also_seen_in: list[str] = Field(
        default_factory=list,
        description="other incidents this lesson was seen in: its recurrences, and hits "
        "saying the same thing that were collapsed into this one",
    )
    collapsed: list[UUID] = Field(
        default_factory=list,
        description="entries that say the same thing, folded into this hit at query time",
    )
    why: MatchExplanation
    feedback: FeedbackCounts = Field(
        default_factory=FeedbackCounts,
        description="verdicts of past investigations (shown, not used for ranking)",
    )
    staleness: Staleness | None = Field(
        default=None,
        description="set when the topology says the lesson's service was retired or "
        "renamed, or a dependency it names is gone (at `as_of`, or now); not used for "
        "ranking (docs/EVAL.md)",
    )


class QueryMetadata(BaseModel):
    """What makes silent failure visible: candidates per leg and vector coverage."""

    model_config = ConfigDict(frozen=True)

    read_from: Literal["reader", "writer"] | None = Field(
        default=None,
        description="where the searches ran: reader (a replica, pg_is_in_recovery) or "
        "writer; set by the query API, where a stage's reads scale out",
    )
    topic_tags: list[str]
    lexical_candidates: int
    vector_candidates: int
    vector_leg: str
    vector_leg_error: str | None
    embed_rev: str
    vector_cutoff: float
    active_entries: int
    active_entries_without_current_vector: int
    services_in_scope: list[str] | None = None
    as_of: datetime | None = Field(
        default=None,
        description="the moment whose topology the scope and staleness were read from",
    )
    fusion: str = FUSION
    reranker: str = Field(
        default="off",
        description="off (none configured), ok (the fused top 25 reordered by the "
        "reranker) or unavailable (it failed or timed out: the fused order was served)",
    )
    reranker_error: str | None = None
    confidence_model: str | None = Field(
        default=None, description="the confidence model that scored the hits"
    )
    ranking: str = Field(
        default="fused",
        description="confidence (hits ordered by their confidence) or fused (by the fused score)",
    )
    min_confidence: float | None = Field(
        default=None, description="the floor in force: hits below it were withheld"
    )
    withheld: int = Field(
        default=0,
        description="candidates among the best `limit` withheld for a confidence under the floor",
    )
    withheld_best_confidence: float | None = Field(
        default=None, description="the best confidence among the withheld candidates"
    )
    no_precedent: bool = Field(
        default=False,
        description="true only when the search was complete (`searched`) and no hit reached "
        "the floor: memory holds nothing close to the topic. A degraded search that serves "
        "nothing says so in `degraded`, never no_precedent",
    )
    searched: Literal["complete", "keywords_only", "partial"] = Field(
        default="complete",
        description="what the search could look at: complete (both legs over every active "
        "entry); keywords_only (meaning search could not run: the topic was not embedded "
        "in time or its embedding failed, or no active entry has a current vector yet; "
        "every hit is a keyword match, scored by the keyword model); partial (some active "
        "entries have no current vector yet: those were searched by keywords only)",
    )
    degraded: str | None = Field(
        default=None,
        description="in words, when the search was not complete: what it could not search "
        "and what that means for this answer",
    )
    message: str | None = Field(
        default=None, description="in words, when memory holds nothing close or withheld candidates"
    )


class MemoryQueryResult(BaseModel):
    """The answer to `query_org_memory`."""

    model_config = ConfigDict(frozen=True)

    hits: list[MemoryHit]
    metadata: QueryMetadata
    notice: str = (
        "Past incidents are hints, not ground truth: verify each against live telemetry "
        "before relying on it."
    )
