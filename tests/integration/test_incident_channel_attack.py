"""Issue 50's attack, replayed (point 4 of "What was measured"): one sender of incident
events asks questions under incident ids of its own, then closes the incidents with
`recalled` outcomes that confirm the weak hits and refute the strong ones, 15 events and
then 30. On the demo lake with the real local model (which withholds weak hits), no served
confidence of a fixed set of questions moves by more than 0.05, and "no precedent" is said
where it was before: on an organization with no recalibration, and on one whose honest
verdicts recalibrated it.

Before issue 50 each incident was a source of its own: 15 events moved the demo's map to
scale 0.5 / shift +0.85, then to the bounds' corner, and an unanswerable question's three
withheld hits were served at 0.52 / 0.34 / 0.24."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest

from grandbo.local.demo import DEMO_ENTRIES, DEMO_TOPIC, seed_demo
from grandbo.memory.domain.models import MemoryQueryResult
from grandbo.memory.incidents import MAX_RECALLED, parse_incident_closed, record_incident
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService

from .helpers import log_answer

# the questions whose answers the attack must not move: the README's detailed question, its
# short form, a loosely related one, and two memory cannot answer
QUESTIONS = (
    DEMO_TOPIC,
    "payments cannot get a database connection",
    "older Android clients fail the TLS handshake at the edge proxy",
    "the marketing team wants a new font for the quarterly newsletter layout",
    "the office printer jams whenever the badge reader in the lobby reboots",
)
MOVED = 0.05
ATTACKER = "attacker-key"  # one query key: one asker over HTTP and MCP alike
# or the incidents the sender names are ones the organization's agents asked under (in
# AWS, whoever may put events on the bus may name any incident)
AGENTS = tuple(f"agent-{n}" for n in range(6))


@pytest.fixture
def demo(repository: MemoryRepository, local_provider: Any, tenant: str) -> MemoryService:
    service = MemoryService(repository, local_provider)
    seed_demo(service, tenant)
    service.embed_pending(tenant)
    return service


def answers(service: MemoryService, tenant: str) -> dict[str, tuple[dict[UUID, float], bool]]:
    """Each question's every candidate with its confidence (nothing withheld), and whether
    its answer (the organization's floor) says no precedent."""
    seen = {}
    for question in QUESTIONS:
        every = service.query_org_memory(tenant, question, limit=25, min_confidence=0.0)
        answer = service.query_org_memory(tenant, question)
        seen[question] = (
            {hit.entry_id: float(hit.confidence or 0.0) for hit in every.hits},
            answer.metadata.no_precedent,
        )
    return seen


def largest_move(
    before: dict[str, tuple[dict[UUID, float], bool]],
    after: dict[str, tuple[dict[UUID, float], bool]],
) -> float:
    moves = []
    for question, (confidences, _) in before.items():
        assert after[question][0].keys() == confidences.keys()
        moves += [abs(after[question][0][i] - c) for i, c in confidences.items()]
    return max(moves)


def attack(service: MemoryService, tenant: str, incidents: range, askers: tuple[str, ...]) -> None:
    """One sender: under each incident id of its own, every question is asked (by its own
    key, or by the organization's agents in turn; every candidate served: the floor at
    0), then it closes the incident confirming the weakest hits served and refuting the
    strongest."""
    for n in incidents:
        incident = f"ATK-{n}"
        served: dict[UUID, float] = {}
        for question in QUESTIONS:
            answer: MemoryQueryResult = log_answer(
                service,
                tenant,
                question,
                incident_id=incident,
                caller=askers[n % len(askers)],
                asked_at=datetime.now(UTC),
                limit=25,
                min_confidence=0.0,
            )
            for hit in answer.hits:
                served[hit.entry_id] = min(served.get(hit.entry_id, 1.0), hit.confidence or 0.0)
        ranked = sorted(served, key=lambda i: served[i])[:MAX_RECALLED]
        half = len(ranked) // 2
        recalled = [
            {"entry_id": str(i), "outcome": "confirmed" if k < half else "refuted"}
            for k, i in enumerate(ranked)
        ]
        record_incident(
            service,
            parse_incident_closed(
                {
                    "tenant_id": tenant,
                    "incident_id": incident,
                    "title": "Crafted",
                    "closed_at": "2026-11-29T10:00:00Z",
                    "recalled": recalled,
                }
            ),
        )


def honest_verdicts(service: MemoryService, tenant: str) -> None:
    """Five agents, each under six incidents of its own, ask for a lesson by its title
    (five hits, none withheld) and judge every hit served: helpful the lesson asked for,
    not helpful the rest."""
    for n in range(30):
        asker = f"agent-{n % 5}"
        incident = f"HON-{n}"
        wanted = DEMO_ENTRIES[n % len(DEMO_ENTRIES)]["title"]
        answer = log_answer(
            service,
            tenant,
            wanted,
            incident_id=incident,
            caller=asker,
            limit=5,
            min_confidence=0.0,
        )
        for hit in answer.hits:
            service.record_caller_feedback(
                tenant,
                hit.entry_id,
                {
                    "verdict": "helpful" if hit.title == wanted else "not_helpful",
                    "incident_id": incident,
                },
                caller=asker,
            )


@pytest.mark.parametrize("asked_by", ["its own key", "the agents"])
@pytest.mark.parametrize("organization", ["never recalibrated", "recalibrated honestly"])
def test_one_sender_of_30_crafted_incidents_moves_no_served_confidence(
    demo: MemoryService, tenant: str, organization: str, asked_by: str
) -> None:
    # Given the demo organization, as it is or recalibrated from its agents' verdicts
    if organization == "recalibrated honestly":
        honest_verdicts(demo, tenant)
        assert demo.repository.query_reads(tenant, demo.provider.embed_rev)[2] is not None
    before = answers(demo, tenant)
    said_no_precedent = {q for q, (_, none) in before.items() if none}
    assert said_no_precedent, "a question memory cannot answer is in the set"
    assert len(said_no_precedent) < len(QUESTIONS)
    assert any(
        min(before[q][0].values(), default=1.0) < demo.confidence_model(demo.provider).default_floor
        for q in said_no_precedent
    ), "it has withheld hits an attack could lift"

    figures = {}
    for sent in (15, 30):
        # When one sender sends 15 crafted incident-closed events, then 15 more
        attack(
            demo,
            tenant,
            range(sent - 15, sent),
            (ATTACKER,) if asked_by == "its own key" else AGENTS,
        )

        # Then no served confidence moved by more than 0.05, and no precedent is still
        # said where it was
        after = answers(demo, tenant)
        figures[sent] = largest_move(before, after)
        assert figures[sent] <= MOVED, (sent, figures)
        assert {q for q, (_, none) in after.items() if none} == said_no_precedent
    print(f"\n{organization}, asked by {asked_by}: largest move after 15, 30 events: {figures}")
    for question, (confidences, none) in before.items():
        top = sorted(confidences, key=lambda i: -confidences[i])[:3]
        was = " / ".join(f"{confidences[i]:.4f}" for i in top)
        now = " / ".join(f"{after[question][0][i]:.4f}" for i in top)
        print(f"  {question[:48]!r}: {was} -> {now}; no precedent {none} -> {after[question][1]}")
