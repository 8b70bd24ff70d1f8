"""A lake event's `recorded_at` that UTC cannot hold (year 1 east of Greenwich) is a named
validation error, not an OverflowError (schemathesis found the 500 on POST /v1/admin/import)."""

from __future__ import annotations

import uuid

import pytest
from pydantic import ValidationError

from grandbo.memory.domain.lake_stream import LakeEvent


def _event(recorded_at: str) -> dict[str, object]:
    return {
        "actor": "admin:k",
        "entry_id": str(uuid.uuid4()),
        "event_type": "entry_split",
        "idempotency_key": "k",
        "payload": {},
        "recorded_at": recorded_at,
        "revision": 1,
    }


@pytest.mark.parametrize("moment", ["0001-01-01T00:00:00+00:01", "0001-01-01T00:00:00+14:00"])
def test_a_moment_utc_cannot_hold_is_refused_by_name(moment: str) -> None:
    with pytest.raises(ValidationError) as refused:
        LakeEvent.model_validate(_event(moment))
    assert "out of the range of dates" in str(refused.value)
    assert refused.value.errors()[0]["loc"] == ("recorded_at",)


def test_a_moment_in_another_zone_is_kept_in_utc() -> None:
    event = LakeEvent.model_validate(_event("2026-11-29T12:00:00+02:00"))
    assert event.recorded_at.isoformat() == "2026-11-29T10:00:00+00:00"
