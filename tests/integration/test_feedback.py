"""Feedback (issue 14, item 5): a verdict is an event, counted on the entry, shown on hits,
replayed by a rebuild; entries called misleading repeatedly are listed for review."""

from __future__ import annotations

import uuid

import pytest

from grandbo.errors import EntryNotFoundError, InvalidInputError
from grandbo.memory.service import MISLEADING_REVIEW_THRESHOLD, MemoryService

from .helpers import context, entry

TOPIC = "checkout requests time out waiting for a database connection from the pool"


def test_verdicts_are_counted_shown_on_hits_and_replayed(
    service: MemoryService, tenant: str, other_tenant: str
) -> None:
    created = service.record_entry(
        tenant,
        entry(
            "Pool exhausted",
            "Checkout requests waited for a database connection until the pool was resized.",
        ),
        context(),
    ).entry
    service.embed_pending(tenant)
    verdicts = ["helpful", "helpful", "not_helpful", "misleading"]
    for n, verdict in enumerate(verdicts):
        outcome = service.record_feedback(
            tenant,
            created.entry_id,
            {"verdict": verdict, "incident_id": f"INC-{n}", "note": "checked the pool"},
            context(f"feedback:{n}"),
        )
        assert outcome.applied
    again = service.record_feedback(
        tenant,
        created.entry_id,
        {"verdict": "helpful", "incident_id": "INC-0"},
        context("feedback:0"),
    )
    assert again.applied is False  # the same key: a retry counts once
    stored = service.get_entry(tenant, created.entry_id)
    assert (stored.helpful_count, stored.not_helpful_count, stored.misleading_count) == (2, 1, 1)
    assert stored.revision == 1
    assert stored.updated_at == created.updated_at
    (hit,) = service.query_org_memory(tenant, TOPIC).hits
    assert hit.feedback.model_dump() == {"helpful": 2, "not_helpful": 1, "misleading": 1}
    # an event like any other: the replayed projection has the same counts
    assert service.repository.verify_projection(tenant).mismatches == []
    service.repository.rebuild_projection(tenant)
    assert service.get_entry(tenant, created.entry_id).helpful_count == 2

    with pytest.raises(EntryNotFoundError):  # another organization's entry does not exist
        service.record_feedback(
            other_tenant, created.entry_id, {"verdict": "helpful", "incident_id": "I"}, context()
        )
    with pytest.raises(EntryNotFoundError):
        service.record_feedback(
            tenant, uuid.uuid4(), {"verdict": "helpful", "incident_id": "I"}, context()
        )
    for bad in (
        {"verdict": "great", "incident_id": "I"},
        {"verdict": "helpful"},
        {"verdict": "helpful", "incident_id": "I", "note": "a\x00b"},
    ):
        with pytest.raises(InvalidInputError):
            service.record_feedback(tenant, created.entry_id, bad, context())
    assert service.get_entry(tenant, created.entry_id).helpful_count == 2  # nothing partial


def lessons(service: MemoryService, tenant: str, n: int) -> list[uuid.UUID]:
    return [
        service.record_entry(
            tenant,
            entry(
                f"Lesson {i}",
                f"What was learned in case {i}: a retry storm amplified a brief brownout.",
            ),
            context(),
        ).entry.entry_id
        for i in range(n)
    ]


def misleading(service: MemoryService, tenant: str, entry_id: uuid.UUID, times: int) -> None:
    for n in range(times):
        # distinct callers: the review list weighs callers, not verdicts
        service.record_feedback(
            tenant,
            entry_id,
            {"verdict": "misleading", "incident_id": f"INC-{n}"},
            context(actor=f"investigator-{n}"),
        )


def test_entries_called_misleading_repeatedly_are_listed_for_review(
    service: MemoryService, tenant: str
) -> None:
    ids = lessons(service, tenant, 3)
    misleading(service, tenant, ids[0], MISLEADING_REVIEW_THRESHOLD + 1)
    misleading(service, tenant, ids[1], 1)
    # retired since it was served: the verdict still counts, but it needs no review
    service.retire_entry(tenant, ids[2], "wrong", context())
    misleading(service, tenant, ids[2], MISLEADING_REVIEW_THRESHOLD + 2)
    assert [e.entry_id for e in service.entries_for_review(tenant)] == [ids[0]]
    assert service.get_entry(tenant, ids[2]).misleading_count == MISLEADING_REVIEW_THRESHOLD + 2
    assert service.repository.verify_projection(tenant).mismatches == []


def test_a_correction_or_a_retirement_takes_an_entry_off_the_review_list(
    service: MemoryService, tenant: str
) -> None:
    ids = lessons(service, tenant, 2)
    for entry_id in ids:
        misleading(service, tenant, entry_id, MISLEADING_REVIEW_THRESHOLD + 1)
    assert len(service.entries_for_review(tenant)) == 2
    service.correct_entry(
        tenant,
        ids[0],
        entry(
            "Lesson 0",
            "The corrected lesson of case 0: the retries came from clients without jitter.",
        ),
        context(),
    )
    service.retire_entry(tenant, ids[1], "misleading", context())
    assert service.entries_for_review(tenant) == []
    assert service.get_entry(tenant, ids[0]).misleading_count == 2  # the counts stay
