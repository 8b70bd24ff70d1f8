"""A verdict an admin removed (issue 50, point 4) is uncounted by the projection's fold, as
the write path uncounts it: `grandbo rebuild --verify` replays the removal like any event."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from grandbo.memory.domain.models import EventType
from grandbo.memory.domain.projection import StoredEvent, UnreplayableEventError, replay

ENTRY = uuid.uuid4()
AT = datetime(2026, 5, 1, tzinfo=UTC)


def _event(event_type: EventType, payload: dict[str, Any], n: int) -> StoredEvent:
    return StoredEvent(ENTRY, event_type, 1, payload, AT, event_id=n)


CREATED = _event(
    EventType.CREATED,
    {"title": "Pool exhausted", "summary": "the pool ran dry", "tags": [], "origin": "admin"},
    1,
)


def _verdict(verdict: str, n: int) -> StoredEvent:
    return _event(EventType.FEEDBACK, {"verdict": verdict, "incident_id": f"INC-{n}"}, n)


def _removal(verdict: str, n: int) -> StoredEvent:
    payload = {"verdict_key": f"query:k:feedback:{n}", "verdict": verdict, "reason": "a flood"}
    return _event(EventType.FEEDBACK_REMOVED, payload, n)


def test_a_removed_verdict_is_uncounted_and_the_others_stay() -> None:
    events = [CREATED, _verdict("helpful", 2), _verdict("misleading", 3), _removal("misleading", 4)]
    entry = replay(events)[ENTRY]
    assert (entry.helpful_count, entry.not_helpful_count, entry.misleading_count) == (1, 0, 0)
    assert entry.revision == 1
    assert entry.updated_at == AT  # a verdict's removal, as a verdict, changes no date


def test_a_removal_of_a_verdict_never_counted_cannot_be_replayed() -> None:
    with pytest.raises(UnreplayableEventError, match="does not count"):
        replay([CREATED, _verdict("helpful", 2), _removal("misleading", 3)])
    with pytest.raises(UnreplayableEventError):
        replay([CREATED, _verdict("helpful", 2), _removal("not-a-verdict", 3)])
