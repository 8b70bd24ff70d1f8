"""The projection as a pure fold over events: what `org_memory_entries` must equal.

The write path updates the projection inline with SQL; `grandbo rebuild --verify` replays
the events through this fold and compares, so the two are checked against each other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from grandbo.memory.domain.models import (
    REDACTED_TEXT,
    EntryStatus,
    EventType,
    Kind,
    Origin,
    Verdict,
)
from grandbo.text.tags import given_tags, spelled_back, tag_words


@dataclass(frozen=True, slots=True)
class StoredEvent:
    entry_id: UUID
    event_type: EventType
    revision: int
    payload: dict[str, Any]
    recorded_at: datetime
    event_id: int | None = None  # the log's; None where the event is not stored yet


class UnreplayableEventError(ValueError):
    """An event the fold cannot apply (a payload no write makes: stored by an earlier
    version's import, before `grandbo.memory.lifecycle.admission` checked them)."""

    def __init__(self, event: StoredEvent, problem: Exception) -> None:
        where = "" if event.event_id is None else f"event {event.event_id} "
        super().__init__(
            f"{where}({event.event_type.value} of entry {event.entry_id}) cannot be "
            f"replayed: {type(problem).__name__}: {problem}"
        )
        self.event = event


# The fold's errors on a payload no write makes (a missing field, a wrong type or value)
_UNREPLAYABLE = (KeyError, ValueError, TypeError, AttributeError, IndexError, OverflowError)


@dataclass(frozen=True, slots=True)
class ProjectedEntry:
    entry_id: UUID
    title: str
    summary: str
    tags: tuple[str, ...]
    service: str | None
    origin: Origin
    status: EntryStatus
    revision: int
    incident_id: str | None
    superseded_by: UUID | None
    created_at: datetime
    updated_at: datetime
    helpful_count: int = 0
    not_helpful_count: int = 0
    misleading_count: int = 0
    kind: Kind = Kind.DURABLE
    expires_at: datetime | None = None
    merged_into: UUID | None = None
    never_merge: bool = False
    # derived from the entries merged into this one (`derive_recurrences`)
    seen_count: int = 1
    last_seen_at: datetime | None = None
    seen_in_incidents: tuple[str, ...] = ()
    # the tags it was given, as written (`tags`: the lexical index's, stems included)
    given_tags: tuple[str, ...] = ()

    @property
    def index_tags(self) -> tuple[str, ...]:
        return self.tags


def _uuid(value: Any) -> UUID | None:
    return None if value is None else UUID(str(value))


def _text(p: dict[str, Any], key: str) -> str:
    value = p[key]
    if not isinstance(value, str):
        raise TypeError(f"{key} is {type(value).__name__}, not text")
    return value


def _optional_text(p: dict[str, Any], key: str) -> str | None:
    return None if p.get(key) is None else _text(p, key)


def _tags(p: dict[str, Any]) -> tuple[str, ...]:
    tags = p["tags"]
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        raise TypeError("tags is not a list of text")
    return tuple(tags)


def _given_tags(p: dict[str, Any]) -> tuple[str, ...]:
    """The tags a text event was given, as written; an event from before migration 0041
    holds only the index's stems: those its own words do not give (`replay` spells them
    back in the lake's words)."""
    if "given_tags" not in p:
        return tuple(given_tags(_text(p, "title"), _text(p, "summary"), p.get("service"), _tags(p)))
    tags = p["given_tags"]
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        raise TypeError("given_tags is not a list of text")
    return tuple(tags)


def _count(p: dict[str, Any], key: str) -> int:
    value = p.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
        raise TypeError(f"{key} is not a count")
    return value


def removed_payload(event_type: EventType, payload: dict[str, Any]) -> bool:
    """Whether the payload is one a redaction replaced (`{"redacted": true, "sha256": ...}`,
    migration 0019): any event of a redacted entry but its own `entry_redacted`."""
    return payload.get("redacted") is True and event_type is not EventType.REDACTED


def apply_event(
    state: dict[UUID, ProjectedEntry], event: StoredEvent, final: set[UUID] | None = None
) -> None:
    """Fold one event into `state` (entry id -> entry). `final` holds the entries whose
    redaction is folded: a tombstone is final, whatever event of it comes later (an
    import of its text under new keys, a replay in another order) changes nothing."""
    if final is not None and event.entry_id in final:
        return
    p = event.payload
    if removed_payload(event.event_type, p):
        # a payload a redaction removed: nothing of it is left to fold; the entry's own
        # `entry_redacted` event, later in the log, makes its tombstone
        if event.event_type is EventType.CREATED:
            state[event.entry_id] = ProjectedEntry(
                entry_id=event.entry_id,
                title=REDACTED_TEXT,
                summary=REDACTED_TEXT,
                tags=(),
                service=None,
                origin=Origin.ADMIN,
                status=EntryStatus.REDACTED,
                revision=event.revision,
                incident_id=None,
                superseded_by=None,
                created_at=event.recorded_at,
                updated_at=event.recorded_at,
            )
        return
    if event.event_type is EventType.REDACTED:
        current = state[event.entry_id]
        expires = p.get("expires_at")
        state[event.entry_id] = replace(
            current,
            title=REDACTED_TEXT,
            summary=REDACTED_TEXT,
            tags=(),
            given_tags=(),
            service=_optional_text(p, "service"),
            origin=Origin(p["origin"]),
            status=EntryStatus.REDACTED,
            revision=event.revision,
            incident_id=_optional_text(p, "incident_id"),
            superseded_by=_uuid(p.get("superseded_by")),
            helpful_count=_count(p, "helpful_count"),
            not_helpful_count=_count(p, "not_helpful_count"),
            misleading_count=_count(p, "misleading_count"),
            kind=Kind(p["kind"]),
            expires_at=None if expires is None else datetime.fromisoformat(expires),
            merged_into=None,
            never_merge=True,
            updated_at=event.recorded_at,
        )
        if final is not None:
            final.add(event.entry_id)
        return
    if event.event_type is EventType.CREATED:
        if event.entry_id in state:  # created once; a second creation is no write's
            raise ValueError("the entry is created twice")
        kind = Kind(p.get("kind", Kind.DURABLE.value))
        ttl_days = p.get("ttl_days")
        if ttl_days is not None and (isinstance(ttl_days, bool) or not isinstance(ttl_days, int)):
            raise TypeError("ttl_days is not a number of days")
        state[event.entry_id] = ProjectedEntry(
            entry_id=event.entry_id,
            title=_text(p, "title"),
            summary=_text(p, "summary"),
            tags=_tags(p),
            given_tags=_given_tags(p),
            service=_optional_text(p, "service"),
            origin=Origin(p["origin"]),
            status=EntryStatus.ACTIVE,
            revision=event.revision,
            incident_id=_optional_text(p, "incident_id"),
            superseded_by=None,
            created_at=event.recorded_at,
            updated_at=event.recorded_at,
            kind=kind,
            expires_at=(
                event.recorded_at + timedelta(days=int(ttl_days))
                if kind is Kind.EPISODIC and ttl_days is not None
                else None
            ),
        )
        return
    current = state[event.entry_id]
    if event.event_type is EventType.MERGED:  # a recurrence of another entry
        state[event.entry_id] = replace(
            current,
            status=EntryStatus.MERGED,
            merged_into=_uuid(p["merged_into"]),
            updated_at=event.recorded_at,
        )
        return
    if event.event_type is EventType.SPLIT:
        # its own entry again: split by an admin (never merged again), or resurfaced when
        # its canonical entry stopped saying its lesson (its merge policy kept)
        state[event.entry_id] = replace(
            current,
            status=EntryStatus.ACTIVE,
            merged_into=None,
            never_merge=bool(p.get("never_merge", True)),
            updated_at=event.recorded_at,
        )
        return
    if event.event_type is EventType.MERGE_POLICY:
        state[event.entry_id] = replace(current, never_merge=bool(p["never_merge"]))
        return
    if event.event_type is EventType.PROMOTED:  # kept from now on; the text stays
        state[event.entry_id] = replace(current, kind=Kind.DURABLE, expires_at=None)
        return
    if event.event_type is EventType.FEEDBACK:  # counted; the text and its dates stay
        counter = f"{Verdict(p['verdict']).value}_count"
        state[event.entry_id] = replace(current, **{counter: getattr(current, counter) + 1})
        return
    if event.event_type is EventType.FEEDBACK_REMOVED:  # an admin removed one: uncounted
        counter = f"{Verdict(p['verdict']).value}_count"
        if getattr(current, counter) < 1:  # no write removes a verdict never counted
            raise ValueError(f"removes a {p['verdict']} verdict the entry does not count")
        state[event.entry_id] = replace(current, **{counter: getattr(current, counter) - 1})
        return
    if event.event_type is EventType.CORRECTED:
        state[event.entry_id] = replace(
            current,
            title=_text(p, "title"),
            summary=_text(p, "summary"),
            tags=_tags(p),
            given_tags=_given_tags(p),
            service=_optional_text(p, "service"),
            # the origin stays: an incident's lesson corrected is still an incident's
            # (migration 0029 gave back the origin corrections before it replaced)
            revision=event.revision,
            updated_at=event.recorded_at,
        )
    elif event.event_type is EventType.RETIRED:
        state[event.entry_id] = replace(
            current, status=EntryStatus.RETIRED, updated_at=event.recorded_at
        )
    elif event.event_type is EventType.SUPERSEDED:
        state[event.entry_id] = replace(
            current,
            status=EntryStatus.SUPERSEDED,
            superseded_by=_uuid(p.get("superseded_by")),
            updated_at=event.recorded_at,
        )


def derive_recurrences(state: dict[UUID, ProjectedEntry]) -> None:
    """Each entry's count, last-seen time and incidents from the entries merged into it:
    the count is 1 + how many, last seen is when the latest was recorded, the incidents
    are theirs (not the entry's own), distinct and sorted. The write path derives the
    same from the same rows (`grandbo.memory.repository.recurrences`)."""
    merged: dict[UUID, list[ProjectedEntry]] = {}
    for entry in state.values():
        if entry.status is EntryStatus.MERGED and entry.merged_into is not None:
            merged.setdefault(entry.merged_into, []).append(entry)
    for entry_id, entry in state.items():
        recurrences = merged.get(entry_id, [])
        state[entry_id] = replace(
            entry,
            seen_count=1 + len(recurrences),
            last_seen_at=max((r.created_at for r in recurrences), default=None),
            seen_in_incidents=tuple(
                sorted(
                    {
                        r.incident_id
                        for r in recurrences
                        if r.incident_id is not None and r.incident_id != entry.incident_id
                    }
                )
            ),
        )


def replay(
    events: Iterable[StoredEvent],
    on_unreplayable: Callable[[UnreplayableEventError], None] | None = None,
    spelled_from: dict[UUID, tuple[str, ...]] | None = None,
) -> dict[UUID, ProjectedEntry]:
    """The projection the events fold into. An event the fold cannot apply raises
    UnreplayableEventError, or with `on_unreplayable` is handed to it and left out (the
    rest of the log still folds: a health check or a rebuild reports it and carries on).
    `spelled_from` gets the stems of each entry whose tags as written were spelled back
    (its last text event from before migration 0041): a spelling is derived from the
    lake's words as they are now, so another spelling of the same stems is no drift."""
    state: dict[UUID, ProjectedEntry] = {}
    final: set[UUID] = set()
    vocabulary: dict[str, str] = {}
    stemmed: set[UUID] = set()  # entries whose tags are a text event's from before 0041
    for event in events:
        try:
            apply_event(state, event, final)
        except _UNREPLAYABLE as exc:
            problem = UnreplayableEventError(event, exc)
            if on_unreplayable is None:
                raise problem from exc
            on_unreplayable(problem)
            continue
        if event.event_type in _TEXT_EVENTS and not removed_payload(
            event.event_type, event.payload
        ):
            p = event.payload
            for text in (p["title"], p["summary"], p.get("service") or ""):
                for stem, word in tag_words(text).items():
                    vocabulary.setdefault(stem, word)
            (stemmed.add if "given_tags" not in p else stemmed.discard)(event.entry_id)
    if spelled_from is not None:
        spelled_from.update(
            (entry_id, state[entry_id].given_tags)
            for entry_id in stemmed
            if entry_id in state and state[entry_id].status is not EntryStatus.REDACTED
        )
    spell_back_given_tags(state, stemmed, vocabulary)
    derive_recurrences(state)
    return state


_TEXT_EVENTS = (EventType.CREATED, EventType.CORRECTED)


def spell_back_given_tags(
    state: dict[UUID, ProjectedEntry], stemmed: Iterable[UUID], vocabulary: dict[str, str]
) -> None:
    """The given tags of entries last written before migration 0041, each stem in a word
    the lake wrote it from (`vocabulary`, stem -> first word seen in the events' texts,
    in log order), a stem no text holds left as it is."""
    for entry_id in stemmed:
        entry = state.get(entry_id)
        if entry is not None and entry.status is not EntryStatus.REDACTED:
            spelled = tuple(spelled_back(entry.given_tags, vocabulary))
            state[entry_id] = replace(entry, given_tags=spelled)
