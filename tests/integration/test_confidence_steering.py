"""No single caller, and no import, steers the confidence (issue 43, point 3): a verdict
recalibrates with the confidence the retrieval log says was served, each source's weight
is capped, an imported verdict is history, and the bounds keep the model's order."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest

from grandbo.memory.domain import recalibration
from grandbo.memory.domain.lake_stream import LakeEvent, StreamDigest, read_stream
from grandbo.memory.domain.models import Feedback
from grandbo.memory.domain.recalibration import SCALE_BOUNDS, ServedVerdict
from grandbo.memory.lifecycle.lake import LakeTransfer
from grandbo.memory.service import MemoryService

from .helpers import CHECKOUT_LESSONS, CHECKOUT_TOPIC, context, entry, log_answer

ATTACKED = CHECKOUT_TOPIC
UNRELATED = "the load balancer served an expired certificate and browsers refused the site"
TEXTS = [
    *CHECKOUT_LESSONS,
    (
        "Certificate expired on the edge",
        "the load balancer certificate expired and browsers failed",
    ),
    ("Certificate renewal job stuck", "the renewal job for the site certificate stopped silently"),
]
# the most any served confidence of an unrelated question may move (issue 43's acceptance)
MOVED = 0.05


def lake(service: MemoryService, tenant: str) -> None:
    for title, summary in TEXTS:
        service.record_entry(tenant, entry(title, summary + " in production today"), context())
    service.embed_pending()


def confidences(service: MemoryService, tenant: str, topic: str) -> dict[UUID, float]:
    """Every candidate's confidence as served for `topic` (nothing withheld)."""
    hits = service.query_org_memory(tenant, topic, limit=25, min_confidence=0.0).hits
    return {hit.entry_id: float(hit.confidence or 0.0) for hit in hits}


def moved(before: dict[UUID, float], after: dict[UUID, float]) -> float:
    assert before.keys() == after.keys()
    return max(abs(after[i] - before[i]) for i in before)


def upside_down_verdicts(
    service: MemoryService, tenant: str, verdicts: int, caller: Callable[[int], str]
) -> list[tuple[float, float]]:
    """Verdicts that would turn the model upside down, each on a hit really served under
    its incident (the answer filed in the retrieval log first): the least confident hit
    helpful, the most confident misleading, each stating the opposite confidence. The
    (served, stated) confidence of each."""
    given = []
    for n in range(verdicts):
        incident = f"INC-{n}"
        hits = log_answer(
            service,
            tenant,
            ATTACKED,
            incident_id=incident,
            caller=caller(n),  # the key that judges asked the question
            limit=25,
            min_confidence=0.0,
        ).hits
        low = min(hits, key=lambda h: h.confidence)
        high = max(hits, key=lambda h: h.confidence)
        hit, verdict, stated = (low, "helpful", 0.99) if n % 2 == 0 else (high, "misleading", 0.01)
        service.record_caller_feedback(
            tenant,
            hit.entry_id,
            {"verdict": verdict, "incident_id": incident, "confidence": stated},
            caller=caller(n),
        )
        given.append((float(hit.confidence), stated))
    return given


def recalibration_of(service: MemoryService, tenant: str) -> recalibration.Recalibration | None:
    return service.repository.query_reads(tenant, service.provider.embed_rev)[2]


def test_120_verdicts_from_one_query_token_move_no_served_confidence(
    service: MemoryService, tenant: str
) -> None:
    # Given an organization, and an unrelated question's confidences
    lake(service, tenant)
    before = confidences(service, tenant, UNRELATED)
    assert len(before) >= 2

    # When one query token gives its whole rate window of verdicts (120 in 300 s), each on
    # a hit it was really served under an incident, each stating a confidence it chose
    upside_down_verdicts(service, tenant, 120, lambda n: "red-team-key")

    # Then nothing was fit from them, and no served confidence moved
    assert recalibration_of(service, tenant) is None
    assert moved(before, confidences(service, tenant, UNRELATED)) <= MOVED
    # all tied, one source: the window holds its latest MAX_PER_SOURCE (issue 50)
    assert len(service.repository.served_verdicts(tenant, 500)) == recalibration.MAX_PER_SOURCE


def _imported_verdicts(
    service: MemoryService, tenant: str, count: int, at: datetime
) -> list[dict[str, Any]]:
    """`count` verdicts as a lake stream would carry them, from many query keys (the cap
    of one source would not stop them), each on a hit served under its incident, as
    `upside_down_verdicts` gives them."""
    events = []
    for n in range(count):
        incident = f"IMP-{n}"
        hits = log_answer(
            service,
            tenant,
            ATTACKED,
            incident_id=incident,
            asked_at=at - timedelta(minutes=10),
            limit=25,
            min_confidence=0.0,
        ).hits
        low = min(hits, key=lambda h: h.confidence)
        high = max(hits, key=lambda h: h.confidence)
        hit, verdict, stated = (low, "helpful", 0.99) if n % 2 == 0 else (high, "misleading", 0.01)
        actor = f"query:imported-{n % 12}"
        payload = Feedback.model_validate(
            {"verdict": verdict, "incident_id": incident, "confidence": stated}
        ).model_dump(mode="json")
        events.append(
            {
                "entry_id": str(hit.entry_id),
                "event_type": "feedback_recorded",
                "revision": 1,
                "payload": payload,
                "actor": actor,
                "idempotency_key": f"{actor}:feedback:{hit.entry_id}:{incident}",
                "recorded_at": at.isoformat(),
            }
        )
    return events


def _stream(tenant: str, events: list[dict[str, Any]]) -> list[str]:
    digest = StreamDigest(tenant)
    lines = [digest.add(LakeEvent.model_validate(event)) for event in events]
    return [*lines, digest.manifest().line()]


def test_an_import_of_120_verdicts_moves_no_served_confidence(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    # Given an organization, an unrelated question's confidences, and a stream of 120
    # verdicts from twelve keys on hits really served under their incidents
    lake(service, tenant)
    before = confidences(service, tenant, UNRELATED)
    at = datetime.now(UTC) - timedelta(minutes=2)
    events = _imported_verdicts(service, tenant, 120, at)

    # When it is imported, and a verdict of the organization's own refits afterwards
    outcome = LakeTransfer(service).import_stream(
        tenant, read_stream(_stream(tenant, events)), merge=True
    )
    assert outcome.inserted == 120
    log_answer(service, tenant, ATTACKED, incident_id="INC-own")
    own = confidences(service, tenant, ATTACKED)
    service.record_caller_feedback(
        tenant, next(iter(own)), {"verdict": "helpful", "incident_id": "INC-own"}, caller="own"
    )

    # Then the imported verdicts are history: counted and shown, never fit
    entries = service.repository.entries_by_id(tenant, [UUID(e["entry_id"]) for e in events])
    assert sum(e.feedback.helpful + e.feedback.misleading for e in entries.values()) == 121
    row = admin_conn.execute(
        "SELECT count(*) FILTER (WHERE imported), count(*) FILTER (WHERE NOT imported)"
        " FROM org_memory_events WHERE tenant_id = %s AND event_type = 'feedback_recorded'",
        (tenant,),
    ).fetchone()
    assert row == (120, 1)
    assert [v.source for v in service.repository.served_verdicts(tenant, 500)] == ["query:own"]
    assert recalibration_of(service, tenant) is None
    assert moved(before, confidences(service, tenant, UNRELATED)) <= MOVED


def test_verdicts_of_five_sources_refit_with_the_confidence_served_not_the_one_stated(
    service: MemoryService, tenant: str
) -> None:
    # Given an organization, and an unrelated question's confidences
    lake(service, tenant)
    before = confidences(service, tenant, UNRELATED)
    order_before = sorted(before, key=lambda i: before[i])

    # When five agents give six verdicts each (30 verdicts' worth: enough only at the
    # last, so every one was served by the model as it is), stating confidences they chose
    given = upside_down_verdicts(service, tenant, 30, lambda n: f"agent-{n % 5}")

    # Then they refit, from the confidences the retrieval log holds, not the stated ones
    fitted = recalibration_of(service, tenant)
    assert fitted is not None
    assert fitted.verdicts == 30
    read = service.repository.served_verdicts(tenant, 500)
    assert sorted(v.confidence for v in read) == pytest.approx(sorted(s for s, _ in given))
    assert {v.source for v in read} == {f"query:agent-{n}" for n in range(5)}
    assert {v.asker for v in read} == {f"agent-{n}" for n in range(5)}
    model = service.confidence_model(service.provider).name
    served = recalibration.fit(read, model)
    assert served is not None
    assert (fitted.scale, fitted.shift) == pytest.approx((served.scale, served.shift))
    stated = recalibration.fit(
        [
            ServedVerdict(stated, v.helpful, v.source, v.asker, v.incident)
            for v, (_, stated) in zip(read, reversed(given), strict=True)
        ],
        model,
    )
    assert stated is not None
    assert abs(stated.shift - fitted.shift) > 0.1 or abs(stated.scale - fitted.scale) > 0.1
    # the refit serves every answer of the organization (what one token could not do)
    after = confidences(service, tenant, UNRELATED)
    assert moved(before, after) > MOVED
    # and upside-down verdicts flatten nothing: the model's order stands, the scale at
    # its bound at least
    assert fitted.scale >= SCALE_BOUNDS[0]
    assert sorted(after, key=lambda i: after[i]) == order_before
    assert len(set(after.values())) == len(set(before.values()))


def test_only_a_verdict_on_a_hit_served_before_it_under_its_incident_is_fit(
    service: MemoryService, tenant: str
) -> None:
    lake(service, tenant)
    served = log_answer(service, tenant, ATTACKED, incident_id="INC-1", limit=2).hits
    assert len(served) == 2
    not_served = next(
        i for i in confidences(service, tenant, ATTACKED) if i not in {h.entry_id for h in served}
    )
    now = datetime.now(UTC)
    log_answer(
        service, tenant, ATTACKED, incident_id="INC-later", asked_at=now + timedelta(hours=1)
    )

    def verdict(entry_id: UUID, incident: str, caller: str) -> None:
        outcome = service.record_caller_feedback(
            tenant,
            entry_id,
            {"verdict": "helpful", "incident_id": incident, "confidence": 0.5},
            caller=caller,
        )
        assert outcome.applied  # recorded and counted, whatever the fit makes of it

    verdict(served[0].entry_id, "INC-1", "tied")
    verdict(not_served, "INC-1", "not-served")  # its incident's answers never held it
    verdict(served[0].entry_id, "INC-unlogged", "unlogged")  # no answer filed under it
    verdict(served[0].entry_id, "INC-later", "before-asked")  # asked only after the verdict

    read = service.repository.served_verdicts(tenant, 500)
    assert [(v.source, v.confidence) for v in read] == [
        ("query:tied", pytest.approx(float(served[0].confidence or 0.0)))
    ]
    assert service.get_entry(tenant, served[0].entry_id).feedback.helpful == 3


def test_a_verdict_on_a_hit_the_keyword_model_scored_is_not_fit_for_the_provider_model(
    service: MemoryService, tenant: str
) -> None:
    # Given entries not embedded yet: every hit is a keyword match, scored by the keyword
    # model (issue 43, point 1)
    for title, summary in TEXTS:
        service.record_entry(tenant, entry(title, summary + " in production today"), context())
    answer = log_answer(service, tenant, ATTACKED, incident_id="INC-kw", limit=2)
    assert answer.metadata.searched == "keywords_only"
    hit = answer.hits[0]
    keywords = service.keyword_model(service.provider).name
    assert hit.why.confidence_model == keywords

    # When its investigation gives a verdict on it
    service.record_caller_feedback(
        tenant, hit.entry_id, {"verdict": "helpful", "incident_id": "INC-kw"}, caller="k"
    )

    # Then it is tied to what was served, but never fit into the provider model's map
    assert len(service.repository.served_verdicts(tenant, 500)) == 1
    model = service.confidence_model(service.provider).name
    assert service.repository.served_verdicts(tenant, 500, model) == []
    assert service.repository.served_verdicts(tenant, 500, keywords) != []
