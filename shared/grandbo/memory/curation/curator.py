"""What a person curating an organization's memory needs beyond the query: entries by
filter, an entry's whole history from the event log, growth per week, possible
duplicates the automatic rule leaves apart, and the two verdicts on such a pair (merge
it, an event reversible by split; or mark it distinct, never suggested again).

Possible duplicates use a looser rule than the automatic merge (`grandbo.memory.
recurrence`): the automatic one merges only restatements (distance 0.03 on MiniLM,
precision 1.000 but recall 0.031 on labelled duplicates: docs/EVAL.md). Re-descriptions
of one bug sat at a median distance of 0.30 with a median tag overlap of 0.42, and the
nearest *different* post-mortem at 0.27 / 0.35, so no rule separates them: a person does.
The suggestion rule is distance within SUGGESTION_DISTANCE (the labelled duplicates' 25th
percentile, 0.19, rounded: a quarter of them qualify) and a tag overlap of at least
SUGGESTION_TAG_OVERLAP, with no conflicting identifiers and the same service (or none),
listing the closest pairs first; what the automatic rule would merge is left to it.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from grandbo.errors import InvalidInputError, MergeRefusedError
from grandbo.memory.domain.idempotency import KeySpace
from grandbo.memory.domain.models import (
    EntryStatus,
    EventType,
    Kind,
    MemoryEntry,
    Origin,
    Staleness,
    WriteContext,
    WriteOutcome,
)
from grandbo.memory.domain.recurrence_rule import (
    DuplicateRule,
    Words,
    may_take_recurrence,
    tag_overlap,
)
from grandbo.memory.domain.redaction_receipt import RedactionReceipt
from grandbo.memory.domain.retrieval_log import RETRIEVAL_ROWS_PER_DAY, CallerDay, LoggedDay
from grandbo.memory.read.recall import validate_service
from grandbo.memory.repository.curation import CatalogFilter
from grandbo.memory.service import QUERY_RATE_PER_MINUTE, MemoryService
from grandbo.memory.vectors.consolidation import duplicate_rule
from grandbo.tenancy import require_tenant

MAX_CATALOG_PAGE = 200
MAX_HISTORY_EVENTS = 500
# what one history answer carries at most, counted as it is sent: its JSON (non-ASCII as
# \u escapes, as the API writes it) inside the JSON of Lambda's proxy answer, which is at
# most 6 MB (the console reads at most 8 MiB). 500 corrections of 20,000-character texts
# would be 20 MB, 100 recurrences of them 2 MB, six times that in another script. Past the
# budget, the newest recurrences that fit are listed, then the first event and the latest
# events that fit in what is left.
MAX_HISTORY_ANSWER_BYTES = 4 * 1024 * 1024
MAX_HISTORY_RECURRENCE_BYTES = 1024 * 1024
_EVENT_FIELDS_BYTES = 512  # an event's id, type, revision, time, actor and path, sent
MAX_GROWTH_WEEKS = 104
SUGGESTION_DISTANCE = 0.2
SUGGESTION_TAG_OVERLAP = 0.3
# the latest entries whose nearest neighbours are compared, and how many each
SUGGESTION_SCAN = 500
SUGGESTION_NEIGHBOURS = 3
MAX_SUGGESTIONS = 500
SUGGESTION_RULE = DuplicateRule(
    max_distance=SUGGESTION_DISTANCE, min_tag_overlap=SUGGESTION_TAG_OVERLAP
)


# the stale lessons the review lists at most (each is checked against the topology)
MAX_STALE_LESSONS = 200


class StaleLesson(BaseModel):
    """An active entry the topology changed under, and what changed."""

    model_config = ConfigDict(frozen=True)

    entry: MemoryEntry
    staleness: Staleness


class CatalogPage(BaseModel):
    model_config = ConfigDict(frozen=True)

    entries: list[MemoryEntry]
    next: str | None = Field(description="the cursor of the next page (None: the last page)")


class HistoryEvent(BaseModel):
    """One event of an entry's log: what it said, who or what wrote it, through which path."""

    model_config = ConfigDict(frozen=True)

    event_id: int
    event_type: EventType
    revision: int
    recorded_at: datetime
    actor: str
    path: str = Field(
        description="the writer's path: incident (an incident-closed event), admin (the "
        "signed API), cli, query (a query-token caller's feedback), expiry (the sweeper), "
        "recurrence (the embed worker), demo, eval, import"
    )
    payload: dict[str, Any]


class EntryHistory(BaseModel):
    model_config = ConfigDict(frozen=True)

    entry: MemoryEntry
    events: list[HistoryEvent] = Field(
        description="oldest first; beyond MAX_HISTORY_EVENTS (500) events, or 2 MiB of their "
        "payloads as JSON, its first event and the latest ones that fit"
    )
    omitted_events: int = Field(
        default=0, description="events between the first and the latest ones, not listed"
    )
    recurrences: list[MemoryEntry] = Field(
        description="the newest first: at most 100, and those that fit in 1 MiB as sent"
    )
    omitted_recurrences: int = Field(
        default=0, description="older recurrences not listed (see MAX_HISTORY_RECURRENCE_BYTES)"
    )
    receipt: RedactionReceipt | None = Field(
        default=None,
        description="a redacted entry's receipt: where its text and spellings were searched, "
        "found, removed and left, and the latest audit's re-verification",
    )


class WeekOfGrowth(BaseModel):
    model_config = ConfigDict(frozen=True)

    week: datetime
    created: dict[str, int] = Field(
        default_factory=dict, description="entries created that week, by origin"
    )
    recurrences: int = Field(default=0, description="recurrences recorded that week")


class Growth(BaseModel):
    model_config = ConfigDict(frozen=True)

    weeks: list[WeekOfGrowth]


class DuplicateSuggestion(BaseModel):
    model_config = ConfigDict(frozen=True)

    canonical: MemoryEntry = Field(
        description="the entry a merge keeps: the older, unless the merge route accepts "
        "only the other way round"
    )
    recurrence: MemoryEntry = Field(
        description="the entry a merge records in the other (POST .../merge of this one)"
    )
    distance: float
    tag_overlap: float
    shared_tags: list[str]


class DuplicateSuggestions(BaseModel):
    model_config = ConfigDict(frozen=True)

    rule: str
    pairs: list[DuplicateSuggestion]


class OrganizationSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    episodic_ttl_days: int
    retrieval_days: int = Field(default=30, description="how long its retrieval log is kept")
    embed_rev: str = Field(description="the model the organization is served from")
    vector_cutoff: float = Field(description="the cutoff its queries use")
    model_vector_cutoff: float = Field(description="the model's own default cutoff")
    calibrated: bool = Field(description="the cutoff in force was measured on its lake")
    confidence_model: str = Field(description="the model that scores its hits' confidence")
    confidence_fit_on: str = Field(
        default="", description="what the confidence model was fit and measured on"
    )
    confidence_fitted_at: datetime | None = Field(
        default=None,
        description="when the confidence model was fitted from its own lake (None: the "
        "model serving was shipped with Grandbo)",
    )
    confidence_fit_questions: int = Field(
        default=0, description="how many questions made from its lake the fit was made on"
    )
    min_confidence: float = Field(description="the confidence floor its queries use")
    model_min_confidence: float = Field(description="the confidence model's default floor")
    min_confidence_set: bool = Field(description="the floor in force was set for it")
    recalibration_verdicts: int = Field(
        default=0, description="how many of its verdicts recalibrated the confidence (0: none)"
    )
    query_rate_per_minute: int = Field(
        default=QUERY_RATE_PER_MINUTE,
        description="queries one caller may ask per minute (past it: 429)",
    )
    retrieval_rows_per_day: int = Field(
        default=RETRIEVAL_ROWS_PER_DAY,
        description="the most questions its retrieval log keeps of one day (UTC)",
    )
    retrieval_days_logged: list[LoggedDay] = Field(
        default_factory=list,
        description="its log's last 7 days: questions kept, dropped by the day's bounds, "
        "and answered while the writer was out of reach (unlogged)",
    )
    retrieval_callers_dropped: list[CallerDay] = Field(
        default_factory=list,
        description="the callers whose questions the log dropped in the last 7 days (past "
        "their share: a quarter of the day's bound), the most dropped first",
    )


class DistinctVerdict(BaseModel):
    model_config = ConfigDict(frozen=True)

    entry_ids: tuple[UUID, UUID]
    recorded: bool = Field(description="False: it was recorded before")


def _cursor(entry: MemoryEntry) -> str:
    raw = f"{entry.created_at.isoformat()}|{entry.entry_id}".encode()
    return base64.urlsafe_b64encode(raw).decode()


def _parse_cursor(cursor: str | None) -> tuple[datetime, UUID] | None:
    if cursor is None:
        return None
    try:
        created, entry_id = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
        when = datetime.fromisoformat(created)
        if when.tzinfo is None:
            raise ValueError("naive")
        return when, UUID(entry_id)
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidInputError("after", "is not a cursor this API returned") from exc


def _choice(field: str, value: str | None, allowed: type[Any]) -> str | None:
    if value is None:
        return None
    try:
        return str(allowed(value).value)
    except ValueError as exc:
        names = ", ".join(member.value for member in allowed)
        raise InvalidInputError(field, f"must be one of {names}") from exc


def _path(idempotency_key: str, actor: str) -> str:
    space = idempotency_key.split(":", 1)[0]
    if space in {member.value for member in KeySpace}:
        return space
    return "import" if actor.startswith("import") else "unknown"


MAX_KEYWORDS = 10


def _keywords(words: str | None) -> tuple[str, ...]:
    """A person's search words, each once, in order (InvalidInputError past MAX_KEYWORDS)."""
    found = tuple(dict.fromkeys((words or "").split()))
    if len(found) > MAX_KEYWORDS:
        raise InvalidInputError("words", f"at most {MAX_KEYWORDS} words")
    return found


class Curation:
    """The curation reads and verdicts over one memory service."""

    def __init__(self, memory: MemoryService) -> None:
        self.memory = memory
        self.repository = memory.repository

    def catalog(
        self,
        tenant_id: str,
        *,
        status: str | None = None,
        kind: str | None = None,
        service: str | None = None,
        origin: str | None = None,
        text: str | None = None,
        words: str | None = None,
        after: str | None = None,
        limit: int = 50,
    ) -> CatalogPage:
        tenant = require_tenant(tenant_id)
        if isinstance(limit, bool) or not 1 <= limit <= MAX_CATALOG_PAGE:
            raise InvalidInputError("limit", f"must be between 1 and {MAX_CATALOG_PAGE}")
        where = CatalogFilter(
            status=_choice("status", status, EntryStatus),
            kind=_choice("kind", kind, Kind),
            service=validate_service(service),
            origin=_choice("origin", origin, Origin),
            text=(text or "").strip() or None,
            words=_keywords(words),
        )
        rows = self.repository.entry_catalog(tenant, where, _parse_cursor(after), limit + 1)
        page = rows[:limit]
        return CatalogPage(
            entries=page, next=_cursor(page[-1]) if len(rows) > limit and page else None
        )

    def history(self, tenant_id: str, entry_id: UUID) -> EntryHistory:
        tenant = require_tenant(tenant_id)
        entry = self.repository.get_entry(tenant, entry_id)
        recurrences = self.memory.recurrences_of(tenant, entry_id)
        listed, spent = [], sent_bytes(entry.model_dump(mode="json"))
        for other in recurrences:  # the newest first
            cost = sent_bytes(other.model_dump(mode="json"))
            if spent + cost > MAX_HISTORY_RECURRENCE_BYTES:
                break
            listed.append(other)
            spent += cost
        rows, omitted = self.repository.entry_events(tenant, entry_id, limit=MAX_HISTORY_EVENTS)
        kept = _within_bytes(rows, MAX_HISTORY_ANSWER_BYTES - spent)
        omitted += len(rows) - len(kept)
        rows = kept
        events = [
            HistoryEvent(
                event_id=row["event_id"],
                event_type=EventType(row["event_type"]),
                revision=row["revision"],
                recorded_at=row["recorded_at"],
                actor=row["actor"],
                path=_path(row["idempotency_key"], row["actor"]),
                payload=row["payload"],
            )
            for row in rows
        ]
        return EntryHistory(
            # the row itself, a redacted one too (its text is gone from it and from every
            # payload): its history is where a person reads who removed it, when and why
            entry=entry,
            events=events,
            omitted_events=omitted,
            recurrences=listed,
            omitted_recurrences=len(recurrences) - len(listed),
            receipt=self.repository.redaction_receipt(tenant, entry_id)
            if entry.status is EntryStatus.REDACTED
            else None,
        )

    def growth(self, tenant_id: str, *, weeks: int = 26) -> Growth:
        tenant = require_tenant(tenant_id)
        if isinstance(weeks, bool) or not 1 <= weeks <= MAX_GROWTH_WEEKS:
            raise InvalidInputError("weeks", f"must be between 1 and {MAX_GROWTH_WEEKS}")
        now = self.memory.now()
        this_week = (now - timedelta(days=now.weekday())).replace(
            hour=0, minute=0, second=0, microsecond=0
        )
        start = this_week - timedelta(weeks=weeks - 1)
        by_week: dict[datetime, WeekOfGrowth] = {
            start + timedelta(weeks=i): WeekOfGrowth(week=start + timedelta(weeks=i))
            for i in range(weeks)
        }
        for row in self.repository.weekly_growth(tenant, start):
            week = row["week"].astimezone(UTC)
            current = by_week.get(week)
            if current is None:
                continue
            if row["what"] == "recurrence":
                current = current.model_copy(update={"recurrences": int(row["n"])})
            else:
                created = {**current.created, row["what"]: int(row["n"])}
                current = current.model_copy(update={"created": created})
            by_week[week] = current
        return Growth(weeks=list(by_week.values()))

    def stale_lessons(self, tenant_id: str) -> list[StaleLesson]:
        """Active entries the topology changed under (retired or renamed service, a named
        dependency gone), each with what changed, at most MAX_STALE_LESSONS."""
        found = self.memory.stale_entries(tenant_id)[:MAX_STALE_LESSONS]
        entries = self.repository.entries_by_id(tenant_id, [entry_id for entry_id, _ in found])
        return [
            StaleLesson(entry=entries[entry_id], staleness=stale)
            for entry_id, stale in found
            if entry_id in entries
        ]

    def duplicate_suggestions(self, tenant_id: str) -> DuplicateSuggestions:
        """Pairs of active entries a person may merge or mark distinct, closest first."""
        tenant = require_tenant(tenant_id)
        serving = self.memory.serving_provider(tenant)
        loose = SUGGESTION_RULE
        strict = duplicate_rule(serving)
        entries, pairs = self.repository.near_pairs(
            tenant,
            serving.embed_rev,
            loose.max_distance,
            scan=SUGGESTION_SCAN,
            neighbours=SUGGESTION_NEIGHBOURS,
        )
        found: list[DuplicateSuggestion] = []
        for a, b, distance in pairs:
            first, second = entries.get(a), entries.get(b)
            if first is None or second is None or first.never_merge or second.never_merge:
                continue
            words = (
                Words.of(first.index_tags, first.service),
                Words.of(second.index_tags, second.service),
            )
            if not loose.words_agree(*words):
                continue
            if strict is not None and strict.same_lesson(
                distance, first.index_tags, second.index_tags, first.service, second.service
            ):
                continue  # the automatic rule's: merged after embedding, collapsed meanwhile
            older, newer = sorted((first, second), key=lambda e: (e.created_at, e.entry_id))
            # offered the way the merge route accepts it: the newer into the older, else the
            # older into the newer (the newer was corrected, has recurrences of its own, or
            # is a durable lesson beside an episodic one); a pair neither way can be merged
            # is no merge to suggest
            if _merge_refusal(older, newer) is None:
                canonical, recurrence = older, newer
            elif _merge_refusal(newer, older) is None:
                canonical, recurrence = newer, older
            else:
                continue
            found.append(
                DuplicateSuggestion(
                    canonical=canonical,
                    recurrence=recurrence,
                    distance=round(distance, 4),
                    tag_overlap=round(tag_overlap(canonical.index_tags, recurrence.index_tags), 3),
                    shared_tags=sorted(set(canonical.index_tags) & set(recurrence.index_tags)),
                )
            )
            if len(found) >= MAX_SUGGESTIONS:
                break
        rule = (
            f"cosine distance <= {loose.max_distance}, tag overlap >= {loose.min_tag_overlap}, "
            "no conflicting identifiers, the same service or none; not what the automatic "
            "rule merges; never a pair marked distinct"
        )
        return DuplicateSuggestions(rule=rule, pairs=found)

    def merge(
        self, tenant_id: str, entry_id: UUID, into: UUID, context: WriteContext
    ) -> WriteOutcome:
        """An admin records `entry_id` as a recurrence of `into` (an `entry_merged` event;
        `split` reverses it). Never across services or kinds the automatic rule forbids,
        never a corrected entry or one with recurrences of its own."""
        tenant = require_tenant(tenant_id)
        if entry_id == into:
            raise InvalidInputError("into", "an entry cannot be merged into itself")
        new = self.memory.get_entry(tenant, entry_id)
        canonical = self.memory.get_entry(tenant, into)
        refusal = _merge_refusal(canonical, new)
        if refusal is not None:
            raise MergeRefusedError(entry_id, into, refusal)
        outcome = self.repository.merge_recurrence(
            tenant, entry_id, into, canonical.revision, {"by": "admin"}, context
        )
        if not outcome.applied and self.memory.get_entry(tenant, entry_id).merged_into != into:
            raise MergeRefusedError(entry_id, into, "an entry changed meanwhile: read both, retry")
        return outcome

    def settings(self, tenant_id: str) -> OrganizationSettings:
        tenant = require_tenant(tenant_id)
        serving = self.memory.serving_provider(tenant)
        reads = self.repository.query_reads(tenant, serving.embed_rev)
        cutoff, floor, own = reads.cutoff, reads.floor, reads.recalibration
        model = self.memory.confidence_model(serving, tenant)
        fit = self.repository.confidence_fit(tenant, serving.embed_rev) if model.measured else None
        fitted = fit is not None and (fit["model"] or {}).get("name") == model.name
        return OrganizationSettings(
            episodic_ttl_days=self.repository.episodic_ttl_days(tenant),
            retrieval_days=self.repository.retrieval_days(tenant),
            embed_rev=serving.embed_rev,
            vector_cutoff=serving.vector_cutoff if cutoff is None else cutoff,
            model_vector_cutoff=serving.vector_cutoff,
            calibrated=cutoff is not None,
            confidence_model=model.name,
            confidence_fit_on=model.fit_on,
            confidence_fitted_at=fit["fitted_at"] if fitted and fit is not None else None,
            confidence_fit_questions=int(fit["questions"]) if fitted and fit is not None else 0,
            min_confidence=model.default_floor if floor is None else floor,
            model_min_confidence=model.default_floor,
            min_confidence_set=floor is not None,
            recalibration_verdicts=0 if own is None else own.verdicts,
            query_rate_per_minute=self.repository.query_rate_per_minute(tenant)
            or QUERY_RATE_PER_MINUTE,
            retrieval_rows_per_day=self.repository.retrieval_rows_per_day(tenant)
            or RETRIEVAL_ROWS_PER_DAY,
            retrieval_days_logged=self.repository.retrieval_days_logged(tenant, 7),
            retrieval_callers_dropped=self.repository.callers_dropped(tenant, 7),
        )

    def mark_distinct(
        self, tenant_id: str, entry_id: UUID, other: UUID, actor: str
    ) -> DistinctVerdict:
        tenant = require_tenant(tenant_id)
        if entry_id == other:
            raise InvalidInputError("other", "an entry is not distinct from itself")
        recorded = self.repository.mark_distinct(tenant, entry_id, other, actor)
        first, second = sorted((entry_id, other))
        return DistinctVerdict(entry_ids=(first, second), recorded=recorded)


def sent_bytes(value: object) -> int:
    """What `value` costs in a Lambda answer: its JSON (non-ASCII as \\u escapes) as a
    string inside the JSON of the proxy answer (each quote and backslash escaped again)."""
    return len(json.dumps(json.dumps(value, default=str)))


def _within_bytes(rows: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """The first event and the latest ones that fit in `budget` as sent, in their order:
    a history never outgrows what its answer may carry."""
    if not rows:
        return rows
    latest: list[dict[str, Any]] = []
    spent = sent_bytes(rows[0]["payload"]) + _EVENT_FIELDS_BYTES
    for row in reversed(rows[1:]):
        spent += sent_bytes(row["payload"]) + _EVENT_FIELDS_BYTES
        if spent > budget:
            break
        latest.append(row)
    return [rows[0], *reversed(latest)]


def _merge_refusal(canonical: MemoryEntry, new: MemoryEntry) -> str | None:
    """Why an admin may not merge `new` into `canonical`, in words, or None."""
    if canonical.status is not EntryStatus.ACTIVE or new.status is not EntryStatus.ACTIVE:
        return "both entries must be active to merge"
    if canonical.service and new.service and canonical.service != new.service:
        return (
            f"the entries are about different services ({new.service!r}, "
            f"{canonical.service!r}): never merged across services"
        )
    if canonical.never_merge or new.never_merge:
        return "one of the entries is marked never-merge"
    if new.revision != 1:
        return "a corrected entry is never merged (it says what a person decided)"
    if new.seen_count != 1:
        return "the entry has recurrences of its own: merge the other way round"
    if not may_take_recurrence(canonical, new):
        return (
            "a durable lesson is never merged into an episodic entry, nor an episodic one "
            "into an entry expiring first"
        )
    return None
