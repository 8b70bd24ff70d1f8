""" "Why not this one?": where an entry an admin expected stands for a topic, and why.

Computed by the code that ranks, not beside it: the query's own search runs once with the
entry as a probe (`MemoryService.answer(probe=...)`: the same statements read its BM25 and
its distance), the answer is the one `query_org_memory` would give, and an entry neither
leg listed is placed in the fused order by the same fusion
(`grandbo.memory.domain.fusion.score_fusion`) with itself as one more candidate. What it says:
served at N (or collapsed into a hit that says the same), retired / superseded /
merged into another entry / redacted, expired, outside the service scope, or not a
candidate of either leg and why (no shared tag; its distance over the cutoff by how much;
not embedded yet; 25 better in the leg), or a candidate ranked N-th behind the others.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from grandbo.errors import EntryNotFoundError
from grandbo.memory.domain.fusion import score_fusion
from grandbo.memory.domain.models import EntryStatus, Kind, MemoryEntry, QueryMetadata
from grandbo.memory.read.confidence.serving import reaches
from grandbo.memory.read.recall import LEG_LIMIT, Answer, Recall
from grandbo.memory.repository.search import Probe, SearchLegs
from grandbo.text.tags import tag_words

Verdict = Literal[
    "served",
    "collapsed",
    "outranked",
    "withheld",
    "not_a_candidate",
    "outside_scope",
    "expired",
    "retired",
    "superseded",
    "merged",
    "redacted",
]


class Rival(BaseModel):
    """An entry ranked ahead of the one asked about."""

    model_config = ConfigDict(frozen=True)

    entry_id: UUID
    title: str
    fused_score: float
    served: bool


class RankingExplanation(BaseModel):
    """Where one entry stands for one topic, and each reason, in words."""

    model_config = ConfigDict(frozen=True)

    entry_id: UUID
    title: str
    status: EntryStatus
    topic: str
    limit: int
    verdict: Verdict
    summary: str = Field(description="the verdict in one sentence")
    reasons: list[str] = Field(description="every factor, one sentence each")
    position: int | None = Field(description="its place among the hits served (1 = first)")
    fused_position: int | None = Field(
        description="its place in the fused order of every candidate (with itself as one "
        "more candidate when neither leg listed it); None when it is not searched at all"
    )
    related_entry_id: UUID | None = Field(
        default=None,
        description="the entry that speaks for it: its successor, the entry it is a "
        "recurrence of, or the hit it was collapsed into",
    )
    lexical_score: float | None
    lexical_rank: int | None
    shared_words: list[str]
    topic_words: list[str]
    vector_distance: float | None
    vector_rank: int | None
    vector_cutoff: float
    has_current_vector: bool
    fused_score: float | None
    lexical_part: float | None
    vector_part: float | None
    confidence: float | None = Field(
        default=None,
        description="its confidence for the topic (None: neither leg listed it)",
    )
    ahead: list[Rival] = Field(description="the entries ranked ahead of it (at most 25)")
    metadata: QueryMetadata


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def explain_ranking(
    memory: Recall,
    tenant_id: str,
    topic: str,
    entry_id: UUID,
    *,
    limit: int = 5,
    service: str | None = None,
    scope: str | None = None,
    as_of: datetime | None = None,
    min_confidence: float | None = None,
) -> RankingExplanation:
    """Why `entry_id` does or does not rank where expected for `topic` (the query's own
    limit, service, scope, as_of and floor). An entry of another organization is not
    found."""
    answer = memory.answer(
        tenant_id,
        topic,
        limit=limit,
        service=service,
        scope=scope,
        as_of=as_of,
        probe=[entry_id],
        min_confidence=min_confidence,
    )
    probe = answer.ranked.legs.probes.get(entry_id)
    if probe is None or probe.entry is None:
        raise EntryNotFoundError(entry_id)
    return _Explainer(memory, answer, probe, probe.entry).explain()


class _Explainer:
    def __init__(self, memory: Recall, answer: Answer, probe: Probe, entry: MemoryEntry) -> None:
        self.memory = memory
        self.answer = answer
        self.probe = probe
        self.entry = entry
        self.words = tag_words(answer.topic)
        self.reasons: list[str] = []

    @property
    def legs(self) -> SearchLegs:
        return self.answer.ranked.legs

    def explain(self) -> RankingExplanation:
        entry = self.entry
        verdict, summary, related = self._status()
        fused_position = None
        parts: tuple[float, float] | None = None
        score: float | None = None
        ahead: list[Rival] = []
        hits = self.answer.result.hits
        served = {hit.entry_id: index for index, hit in enumerate(hits, start=1)}
        if verdict is None:
            fused_position, score, parts, ahead = self._placement(served)
            self._leg_reasons()
            verdict, summary, related = self._served_or_not(served, fused_position, ahead)
        lexical_rank = next(
            (r for r, c in enumerate(self.legs.lexical, start=1) if c.entry_id == entry.entry_id),
            None,
        )
        vector_rank = next(
            (r for r, c in enumerate(self.legs.vector, start=1) if c.entry_id == entry.entry_id),
            None,
        )
        return RankingExplanation(
            entry_id=entry.entry_id,
            title=entry.title,
            status=entry.status,
            topic=self.answer.topic,
            limit=self.answer.limit,
            verdict=verdict,
            summary=summary,
            reasons=self.reasons,
            position=served.get(entry.entry_id),
            fused_position=fused_position,
            related_entry_id=related,
            lexical_score=None if self.probe.bm25 is None else round(self.probe.bm25, 4),
            lexical_rank=lexical_rank,
            shared_words=[self.words.get(tag, tag) for tag in self.probe.shared_tags],
            topic_words=[self.words.get(tag, tag) for tag in self.answer.ranked.topic_tags],
            vector_distance=None if self.probe.distance is None else round(self.probe.distance, 4),
            vector_rank=vector_rank,
            vector_cutoff=self.answer.ranked.vector_cutoff,
            has_current_vector=self._has_current_vector(),
            fused_score=None if score is None else round(score, 6),
            lexical_part=None if parts is None else round(parts[0], 6),
            vector_part=None if parts is None else round(parts[1], 6),
            confidence=None
            if (sure := self.answer.ranked.confidence.get(entry.entry_id)) is None
            else round(sure, 4),
            ahead=ahead,
            metadata=self.answer.result.metadata,
        )

    def _has_current_vector(self) -> bool:
        entry = self.entry
        return (
            entry.embed_rev == self.answer.ranked.embed_rev
            and entry.embedded_revision == entry.revision
        )

    def _status(self) -> tuple[Verdict | None, str, UUID | None]:
        """A reason that keeps the entry out of every search, or (None, "", None)."""
        entry = self.entry
        if entry.status is EntryStatus.REDACTED:
            return "redacted", "Its text was removed for good (redacted): it is never served.", None
        if entry.status is EntryStatus.MERGED:  # its canonical's retirement rehomes it
            return (
                "merged",
                f"It is a recurrence of entry {entry.merged_into}: that entry's hit speaks "
                "for both (split it to serve it on its own).",
                entry.merged_into,
            )
        if entry.status is EntryStatus.SUPERSEDED:
            gone = self._not_served(entry.superseded_by)
            return (
                "superseded",
                f"It was superseded by entry {entry.superseded_by}, which is served instead."
                if gone is None
                else f"It was superseded by entry {entry.superseded_by}, which is {gone} "
                "too: neither is served.",
                entry.superseded_by,
            )
        if entry.status is EntryStatus.RETIRED:
            return "retired", "It was retired: retired entries are never served.", None
        now = self.memory.now()
        if entry.kind is Kind.EPISODIC and entry.expires_at is not None and entry.expires_at <= now:
            return (
                "expired",
                f"It is an episodic entry that expired at {entry.expires_at.isoformat()}: "
                "promote it to serve it again.",
                None,
            )
        scope = self.answer.result.metadata.services_in_scope
        if scope is not None and entry.service not in scope:
            where = "no service" if entry.service is None else f"service {entry.service!r}"
            return (
                "outside_scope",
                f"It is about {where}, outside the query's scope ({', '.join(scope)}).",
                None,
            )
        return None, "", None

    def _not_served(self, entry_id: UUID | None) -> str | None:
        """Why the successor of a superseded entry is itself not served (its status), or
        None when it is: a successor retired, superseded or redacted later leaves the
        lesson served by nothing."""
        if entry_id is None:
            return None
        try:
            successor = self.memory.repository.get_entry(self.entry.tenant_id, entry_id)
        except EntryNotFoundError:
            return "gone"
        if successor.status in (EntryStatus.ACTIVE, EntryStatus.MERGED):
            return None  # served, or spoken for by the entry it is a recurrence of
        return str(successor.status.value)

    def _placement(
        self, served: dict[UUID, int]
    ) -> tuple[int, float, tuple[float, float], list[Rival]]:
        """Its place in the fused order: the query's own, or, when neither leg listed it,
        the same fusion with it as one more candidate."""
        legs = self.legs
        entry_id = self.entry.entry_id
        lexical_ids = [c.entry_id for c in legs.lexical]
        vector_ids = [c.entry_id for c in legs.vector]
        scores = dict(legs.lexical_scores)
        similarities = {key: 1.0 - distance for key, distance in legs.distances.items()}
        extra: list[list[UUID]] = []
        if entry_id not in scores and entry_id not in legs.distances:
            extra = [[entry_id]]
            if self.probe.bm25 is not None:
                scores[entry_id] = self.probe.bm25
            if self.probe.distance is not None:
                similarities[entry_id] = 1.0 - self.probe.distance
        fused = score_fusion([lexical_ids, vector_ids, *extra], scores, similarities)
        position = next(i for i, f in enumerate(fused, start=1) if f.key == entry_id)
        mine = fused[position - 1]
        titles = {key: entry.title for key, entry in legs.entries.items()}
        ahead = [
            Rival(
                entry_id=f.key,
                title=titles.get(f.key, ""),
                fused_score=round(f.score, 6),
                served=f.key in served,
            )
            for f in fused[: position - 1][:LEG_LIMIT]
        ]
        return position, mine.score, mine.parts, ahead

    def _leg_reasons(self) -> None:
        legs = self.legs
        probe = self.probe
        topic_words = [self.words.get(tag, tag) for tag in self.answer.ranked.topic_tags]
        listed_lexically = any(c.entry_id == self.entry.entry_id for c in legs.lexical)
        if probe.bm25 is None:
            self.reasons.append(
                "Lexical: it shares no tag with the topic (the topic's words: "
                f"{', '.join(topic_words) or 'none'})."
            )
        else:
            shared = ", ".join(self.words.get(tag, tag) for tag in probe.shared_tags)
            if listed_lexically:
                self.reasons.append(f"Lexical: BM25 {probe.bm25:.3f}, sharing {shared}.")
            else:
                floor = legs.lexical[-1].score if legs.lexical else 0.0
                self.reasons.append(
                    f"Lexical: BM25 {probe.bm25:.3f} (sharing {shared}), below the "
                    f"{len(legs.lexical)} the lexical leg keeps (the last at {floor:.3f})."
                )
        cutoff = self.answer.ranked.vector_cutoff
        listed_by_vector = any(c.entry_id == self.entry.entry_id for c in legs.vector)
        if self.answer.ranked.vector_error is not None:
            self.reasons.append(
                f"Vector: the vector leg was unavailable ({self.answer.ranked.vector_error})."
            )
        elif not self._has_current_vector():
            self.reasons.append(
                "Vector: it is not embedded yet (no vector of "
                f"{self.answer.ranked.embed_rev} for revision {self.entry.revision}): only "
                "its tags can find it until the embed worker stores one."
            )
        elif probe.distance is not None and probe.distance >= cutoff:
            self.reasons.append(
                f"Vector: its distance {probe.distance:.3f} is over the cutoff {cutoff:.3f} "
                f"by {probe.distance - cutoff:.3f}."
            )
        elif probe.distance is not None and not listed_by_vector:
            last = legs.vector[-1].distance if legs.vector else cutoff
            self.reasons.append(
                f"Vector: distance {probe.distance:.3f} is within the cutoff {cutoff:.3f}, "
                f"but {len(legs.vector)} nearer entries fill the vector leg (the last at "
                f"{last:.3f})."
            )
        elif probe.distance is not None:
            self.reasons.append(
                f"Vector: distance {probe.distance:.3f}, within the cutoff {cutoff:.3f}."
            )

    def _served_or_not(
        self, served: dict[UUID, int], fused_position: int, ahead: list[Rival]
    ) -> tuple[Verdict, str, UUID | None]:
        entry_id = self.entry.entry_id
        limit = self.answer.limit
        if entry_id in served:
            return "served", f"It is served {_ordinal(served[entry_id])} of {limit}.", None
        for index, hit in enumerate(self.answer.result.hits, start=1):
            if entry_id in hit.collapsed:
                return (
                    "collapsed",
                    f"It says the same as hit {index} ({hit.title!r}) and was collapsed "
                    "into it: that hit lists it among its collapsed entries.",
                    hit.entry_id,
                )
        candidate = entry_id in self.legs.lexical_scores or entry_id in self.legs.distances
        if not candidate:
            return (
                "not_a_candidate",
                "Neither leg listed it among its top "
                f"{LEG_LIMIT}; were it one more candidate it would rank "
                f"{_ordinal(fused_position)}.",
                None,
            )
        confidence = self.answer.ranked.confidence.get(entry_id)
        floor = self.answer.result.metadata.min_confidence
        if confidence is not None and floor is not None and not reaches(confidence, floor):
            under = f"its confidence {round(confidence, 4):.4f} is under the floor {floor:g}"
            if fused_position <= limit:  # served but for the floor
                return (
                    "withheld",
                    f"It ranked {_ordinal(fused_position)}, but {under}: hits under it are "
                    "withheld.",
                    None,
                )
            self.reasons.append(f"Confidence: {under}, so it is withheld wherever it ranks.")
        if fused_position <= limit:  # the reranker's order, or collapsed hits, moved it
            return (
                "outranked",
                f"It ranked {_ordinal(fused_position)} by fusion, but the reranker "
                f"({self.answer.result.metadata.reranker}) placed it below the {limit} served.",
                None,
            )
        return (
            "outranked",
            f"It ranked {_ordinal(fused_position)}, behind these {len(ahead)} "
            f"(the query serves {limit}).",
            None,
        )
