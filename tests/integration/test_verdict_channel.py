"""Learning from outcomes that no sender can steer (issue 50, point 4): the incident channel
is one source, an admin's reset starts an epoch no later fit reaches behind, an admin
removes a verdict (who, when, why: an event `rebuild --verify` replays) and the next fit
forgets it, and verdicts tied to nothing, or one source's flood, never crowd the window."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest

from grandbo.errors import InvalidInputError, VerdictNotFoundError
from grandbo.memory.domain import recalibration
from grandbo.memory.domain.lake_stream import read_stream
from grandbo.memory.domain.recalibration import INCIDENT_SOURCE, SOURCE_CAP, weights
from grandbo.memory.incidents import parse_incident_closed, record_incident
from grandbo.memory.lifecycle.lake import LakeTransfer
from grandbo.memory.repository import calibration as calibration_store
from grandbo.memory.service import MISLEADING_REVIEW_THRESHOLD, MemoryService

from .helpers import CHECKOUT_TOPIC, context, log_answer
from .test_confidence_steering import UNRELATED, confidences, lake, moved, recalibration_of
from .test_import_admission import _created, _event, _refused, _stream
from .test_lake_export_import import exported

TOPIC = CHECKOUT_TOPIC
ADMIN = "person:ana@example.com"


def judge(
    service: MemoryService, tenant: str, incidents: Iterable[int], *, prefix: str = "INC"
) -> UUID:
    """Five agents' verdicts, one per incident, each on the best hit its agent was served
    under the incident (asked now): of each agent's six, two helpful, the rest misleading
    (alike: no agent decides the fit). The entry judged."""
    judged = None
    for n in incidents:
        asker = f"agent-{n % 5}"
        incident = f"{prefix}-{n}"
        hit = log_answer(
            service, tenant, TOPIC, incident_id=incident, caller=asker, asked_at=_now()
        ).hits[0]
        judged = hit.entry_id
        service.record_caller_feedback(
            tenant,
            hit.entry_id,
            {"verdict": "helpful" if (n // 5) % 3 == 0 else "misleading", "incident_id": incident},
            caller=asker,
        )
    assert judged is not None
    return judged


def _now() -> datetime:
    return datetime.now(UTC)


def verdict_id(service: MemoryService, tenant: str, incident: str) -> int:
    (verdict,) = service.repository.incident_verdicts(tenant, incident)
    return verdict.verdict_id


# -- the incident channel: one source ------------------------------------------------------


def closed(tenant: str, incident: str, recalled: list[tuple[UUID, str]]) -> Any:
    return parse_incident_closed(
        {
            "tenant_id": tenant,
            "incident_id": incident,
            "title": "Checkout errors",
            "closed_at": "2026-11-29T10:00:00Z",
            "recalled": [{"entry_id": str(e), "outcome": o} for e, o in recalled],
        }
    )


def test_thirty_incidents_of_one_sender_are_one_source_capped_and_fit_nothing(
    service: MemoryService, tenant: str
) -> None:
    # Given an organization whose six agents asked under 30 incidents
    lake(service, tenant)
    before = confidences(service, tenant, UNRELATED)
    for n in range(30):
        answer = log_answer(
            service,
            tenant,
            TOPIC,
            incident_id=f"ATK-{n}",
            caller=f"agent-{n % 6}",
            limit=25,
            min_confidence=0.0,
        )
        ranked = sorted(answer.hits, key=lambda h: h.confidence)
        # When one sender closes each, confirming the weakest hits and refuting the surest
        recalled = [(h.entry_id, "confirmed") for h in ranked[:2]]
        recalled += [(h.entry_id, "refuted") for h in ranked[-2:]]
        record_incident(service, closed(tenant, f"ATK-{n}", recalled))

    # Then its 120 outcomes are all tied, all one source, weighing one source's cap: before
    # issue 50, each incident was a source of its own and they refit the confidence
    read = service.repository.served_verdicts(tenant, 500)
    assert len(read) == recalibration.MAX_PER_SOURCE  # the window holds 100 of one source
    assert {recalibration.source_of(v.source) for v in read} == {INCIDENT_SOURCE}
    assert len({v.incident for v in read}) == 25
    assert sum(weights(read)) == pytest.approx(SOURCE_CAP)
    assert recalibration_of(service, tenant) is None
    assert moved(before, confidences(service, tenant, UNRELATED)) == 0.0


# -- an admin's reset: a new epoch ------------------------------------------------------------


def test_a_reset_starts_an_epoch_no_later_fit_reads_a_verdict_from_before(
    service: MemoryService, tenant: str
) -> None:
    # Given an organization recalibrated from 30 verdicts of five agents
    lake(service, tenant)
    model = confidences(service, tenant, UNRELATED)
    asked = confidences(service, tenant, TOPIC)
    judge(service, tenant, range(30))
    assert recalibration_of(service, tenant) is not None
    assert moved(asked, confidences(service, tenant, TOPIC)) > 0.05

    # When an admin resets it
    epoch = service.reset_recalibration(tenant)

    # Then the model serves, and the next verdict refits nothing (before issue 50 the 30
    # verdicts stayed in the window, and the next one refit the same map)
    assert recalibration_of(service, tenant) is None
    assert confidences(service, tenant, UNRELATED) == model
    judge(service, tenant, [30])
    assert recalibration_of(service, tenant) is None
    assert [v.incident for v in service.repository.served_verdicts(tenant, 500)] == ["INC-30"]
    assert service.repository.recalibration_epoch(tenant) == epoch
    # a verdict after the reset on an answer served before it (through the dropped map) is
    # not read either
    hit = log_answer(
        service, tenant, TOPIC, incident_id="OLD-1", asked_at=epoch - timedelta(seconds=5)
    ).hits[0]
    service.record_caller_feedback(
        tenant, hit.entry_id, {"verdict": "helpful", "incident_id": "OLD-1"}, caller="agent-1"
    )
    assert len(service.repository.served_verdicts(tenant, 500)) == 1

    # And enough new verdicts refit, from the new epoch's only
    judge(service, tenant, range(31, 60))
    fitted = recalibration_of(service, tenant)
    assert fitted is not None
    assert fitted.verdicts == 30


# -- an admin removes a verdict ------------------------------------------------------------------


def test_an_admin_removes_a_verdict_recorded_who_when_why_and_the_next_fit_forgets_it(
    service: MemoryService, tenant: str, other_tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    # Given an organization recalibrated from exactly enough verdicts (30 verdicts' worth)
    lake(service, tenant)
    model = confidences(service, tenant, UNRELATED)
    judged = judge(service, tenant, range(30))
    assert recalibration_of(service, tenant) is not None
    counted = service.get_entry(tenant, judged).feedback
    assert (counted.helpful, counted.misleading) == (10, 20)

    # When an admin removes one, with its reason
    removed_id = verdict_id(service, tenant, "INC-7")
    removed = service.remove_verdict(
        tenant, removed_id, "  a leaked key's verdict  ", context(actor=ADMIN)
    )

    # Then it is recorded (who, when, why), uncounted, and shown as removed
    assert removed.applied
    assert (removed.verdict_id, removed.entry_id, removed.verdict) == (
        removed_id,
        judged,
        "misleading",
    )
    assert (removed.actor, removed.incident_id) == ("query:agent-2", "INC-7")
    assert (removed.removal.actor, removed.removal.reason) == (ADMIN, "a leaked key's verdict")
    row = admin_conn.execute(
        "SELECT actor, payload, recorded_at FROM org_memory_events"
        " WHERE tenant_id = %s AND event_type = 'feedback_removed'",
        (tenant,),
    ).fetchone()
    assert row is not None
    assert row[0] == ADMIN
    assert row[1]["reason"] == "a leaked key's verdict"
    assert row[1]["verdict"] == "misleading"
    assert row[2] == removed.removal.removed_at
    assert service.get_entry(tenant, judged).feedback.misleading == 19
    (listed,) = service.repository.incident_verdicts(tenant, "INC-7")
    assert listed.removal == removed.removal
    assert service.repository.incident_verdicts(tenant, "INC-4")[0].removal is None
    # the next fit forgot it: 29 verdicts' worth is not enough, and the map it made is gone
    read = service.repository.served_verdicts(tenant, 500)
    assert len(read) == 29
    assert "INC-7" not in {v.incident for v in read}
    assert recalibration_of(service, tenant) is None
    assert confidences(service, tenant, UNRELATED) == model
    # and it is an event like any other: the replay uncounts it too (`rebuild --verify`
    # tells a projection that still counts it, and a rebuild repairs it)
    assert service.repository.verify_projection(tenant).mismatches == []
    admin_conn.execute(
        "UPDATE org_memory_entries SET misleading_count = misleading_count + 1"
        " WHERE tenant_id = %s AND entry_id = %s",
        (tenant, judged),
    )
    assert len(service.repository.verify_projection(tenant).mismatches) == 1
    service.repository.rebuild_projection(tenant)
    assert service.get_entry(tenant, judged).feedback.misleading == 19
    assert service.repository.verify_projection(tenant).mismatches == []

    # And a second removal answers the first, changing nothing
    again = service.remove_verdict(tenant, removed_id, "once more", context(actor="admin:ops"))
    assert not again.applied
    assert again.removal == removed.removal
    assert service.get_entry(tenant, judged).feedback.misleading == 19

    # And another organization's verdict, an event that is no verdict, or no event at all
    # is not found; a removal says why
    with pytest.raises(VerdictNotFoundError):
        service.remove_verdict(other_tenant, verdict_id(service, tenant, "INC-4"), "x", context())
    created = admin_conn.execute(
        "SELECT event_id FROM org_memory_events WHERE tenant_id = %s"
        " AND event_type = 'entry_created' LIMIT 1",
        (tenant,),
    ).fetchone()
    assert created is not None
    for missing in (created[0], 0, -1, 2**63, 10**12):
        with pytest.raises(VerdictNotFoundError):
            service.remove_verdict(tenant, missing, "x", context())
    for reason in ("", "   ", "x" * 2001):
        with pytest.raises(InvalidInputError) as refused:
            service.remove_verdict(tenant, verdict_id(service, tenant, "INC-4"), reason, context())
        assert refused.value.field == "reason"
    assert service.get_entry(tenant, judged).feedback.misleading == 19


def test_a_removed_misleading_verdict_takes_an_entry_off_the_review_list(
    service: MemoryService, tenant: str
) -> None:
    assert MISLEADING_REVIEW_THRESHOLD == 1
    lake(service, tenant)
    hit = service.query_org_memory(tenant, TOPIC).hits[0]
    for n, key in enumerate(("k1", "k2")):
        service.record_caller_feedback(
            tenant, hit.entry_id, {"verdict": "misleading", "incident_id": f"R-{n}"}, caller=key
        )
    assert [e.entry_id for e in service.entries_for_review(tenant)] == [hit.entry_id]
    service.remove_verdict(tenant, verdict_id(service, tenant, "R-1"), "a flood", context())
    assert service.entries_for_review(tenant) == []


def test_a_removal_moves_with_the_lake_and_a_stream_cannot_forge_one(
    service: MemoryService, tenant: str, other_tenant: str
) -> None:
    lake(service, tenant)
    judged = judge(service, tenant, range(3))
    service.remove_verdict(tenant, verdict_id(service, tenant, "INC-1"), "a flood", context())
    lines = exported(service, tenant)

    outcome = LakeTransfer(service).import_stream(other_tenant, read_stream(lines), rename=True)

    assert outcome.inserted == len(lines) - 1
    assert (
        service.get_entry(other_tenant, judged).feedback
        == service.get_entry(tenant, judged).feedback
    )
    assert service.repository.verify_projection(other_tenant).mismatches == []
    (moved_verdict,) = service.repository.incident_verdicts(other_tenant, "INC-1")
    assert moved_verdict.removal is not None
    assert moved_verdict.removal.reason == "a flood"

    # a removal naming no verdict of its entry, or one removed already, is refused
    created = _event(_created())
    entry_id = created["entry_id"]
    key = f"query:k:feedback:{uuid.uuid4()}"
    verdict = _event(
        {"verdict": "helpful", "incident_id": "INC-9", "note": None},
        entry_id=entry_id,
        event_type="feedback_recorded",
        actor="query:k",
        key=key,
    )

    def removal(verdict_key: str, said: str = "helpful") -> dict[str, Any]:
        payload = {"verdict_key": verdict_key, "verdict": said, "reason": "a flood"}
        return _event(payload, entry_id=entry_id, event_type="feedback_removed")

    fresh = f"f-{uuid.uuid4().hex[:12]}"
    for events, refused_at in (
        ([created, verdict, removal("query:k:feedback:nothing")], 2),
        ([created, verdict, removal(key, "misleading")], 2),  # not the verdict it removes
        ([created, verdict, removal(key), removal(key)], 2),  # twice
        ([created, removal(key), verdict], 1),  # before it
    ):
        assert _refused(service, fresh, events) == f"events.{refused_at}.payload.verdict_key"
    refused = _event(
        {"verdict_key": key, "verdict": "helpful", "reason": " "},
        entry_id=entry_id,
        event_type="feedback_removed",
    )
    assert _refused(service, fresh, [created, verdict, refused]) == "events.2.payload.reason"
    lines = _stream(fresh, [created, verdict, removal(key)])
    assert LakeTransfer(service).import_stream(fresh, read_stream(lines)).inserted == 3
    assert service.get_entry(fresh, UUID(entry_id)).feedback.helpful == 0


# -- the window: tied verdicts only, at most MAX_PER_SOURCE of one source --------------------


def test_verdicts_tied_to_nothing_or_one_sources_flood_never_crowd_the_window(
    service: MemoryService, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a window of 40 verdicts, at most 12 of one source (500 and 100 in production)
    monkeypatch.setattr(recalibration, "MAX_VERDICTS", 40)
    monkeypatch.setattr(calibration_store, "MAX_PER_SOURCE", 12)
    lake(service, tenant)
    judged = judge(service, tenant, range(30))
    fitted = recalibration_of(service, tenant)
    assert fitted is not None

    # When a key floods 60 verdicts no answer ties (made-up incidents), newer than all
    for n in range(60):
        service.record_feedback(
            tenant,
            judged,
            {"verdict": "helpful", "incident_id": f"MADE-UP-{n}"},
            context(actor="query:flood"),
        )
    # Then the window is the 30 tied verdicts still (before issue 50 it was the flood's
    # 40, none tied: nothing could refit)
    read = service.repository.served_verdicts(tenant, recalibration.MAX_VERDICTS)
    assert len(read) == 30
    assert {v.source for v in read} == {f"query:agent-{n}" for n in range(5)}

    # And one key's tied flood (asked, then judged, under 30 incidents of its own) holds 12
    # places of the window: the others' verdicts stay in it (without the bound of a source,
    # 30 of the flood's and 10 of theirs), and the recalibration stands
    for n in range(30):
        incident = f"FLOOD-{n}"
        hit = log_answer(
            service, tenant, TOPIC, incident_id=incident, caller="flood", asked_at=_now()
        ).hits[-1]
        service.record_caller_feedback(
            tenant, hit.entry_id, {"verdict": "helpful", "incident_id": incident}, caller="flood"
        )
    read = service.repository.served_verdicts(tenant, recalibration.MAX_VERDICTS)
    assert len(read) == 40
    assert sum(v.source == "query:flood" for v in read) == 12
    assert {v.source for v in read if v.source != "query:flood"} == {
        f"query:agent-{n}" for n in range(5)
    }
    assert recalibration_of(service, tenant) is not None
