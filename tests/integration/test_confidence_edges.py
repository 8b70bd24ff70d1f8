"""The floor, the recalibration and their edges, from issue 33's break-it pass: the floor
before the limit (an empty answer means nothing reached it), the explanation's withheld
verdict, dropping a recalibration, and code ahead of migration 0026."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.errors import StoreUnavailableError
from grandbo.memory.curation.curator import Curation
from grandbo.memory.read.explanation import explain_ranking
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.storage.connections import DatabaseUrls, connect

from .helpers import CHECKOUT_LESSONS, CHECKOUT_TOPIC, context, database_at, entry, log_answer

TOPIC = CHECKOUT_TOPIC
TEXTS = CHECKOUT_LESSONS


def lake(service: MemoryService, tenant: str) -> None:
    for title, summary in TEXTS:
        service.record_entry(tenant, entry(title, summary + " in production today"), context())
    service.embed_pending()


def test_the_floor_applies_before_the_limit(service: MemoryService, tenant: str) -> None:
    """The break-it pass's case: the fused order is not the confidence order, so a floor
    applied to the first `limit` hits emptied answers that had a candidate reaching it."""
    lake(service, tenant)
    topic = "workers exhausted the connection pool and writes paused in production"
    every = service.query_org_memory(tenant, topic, limit=25, min_confidence=0.0).hits
    confidences = [h.confidence for h in every]
    assert len(confidences) >= 3
    assert confidences[0] < max(confidences)  # type: ignore[type-var]  # the fused #1 is not the surest
    floor = max(confidences)  # type: ignore[type-var]
    reaching = [h.entry_id for h in every if h.confidence >= floor]  # type: ignore[operator]
    for limit in (1, 2, 5):
        answer = service.query_org_memory(tenant, topic, limit=limit, min_confidence=floor)
        assert [h.entry_id for h in answer.hits] == reaching[:limit]
        assert not answer.metadata.no_precedent  # something reached it, wherever it ranked
        assert answer.metadata.withheld == min(limit, len(every)) - (
            1 if every[:limit] and reaching[0] in [h.entry_id for h in every[:limit]] else 0
        )
    above_all = floor + 0.0001  # type: ignore[operator]
    nothing = service.query_org_memory(tenant, topic, limit=25, min_confidence=above_all)
    assert nothing.hits == []
    assert nothing.metadata.no_precedent
    assert nothing.metadata.withheld_best_confidence == pytest.approx(floor, abs=1e-4)


def test_a_floor_set_to_a_shown_confidence_keeps_that_hit(
    service: MemoryService, tenant: str
) -> None:
    lake(service, tenant)
    best = service.query_org_memory(tenant, TOPIC, min_confidence=0.0).hits[0]
    assert best.confidence is not None
    again = service.query_org_memory(tenant, TOPIC, min_confidence=best.confidence)
    assert best.entry_id in [h.entry_id for h in again.hits]


def test_the_explanation_says_withheld_only_of_what_the_floor_kept_out(
    service: MemoryService, tenant: str
) -> None:
    lake(service, tenant)
    every = service.query_org_memory(tenant, TOPIC, limit=25, min_confidence=0.0).hits
    first, last = every[0], every[-1]
    assert first.confidence is not None
    above = first.confidence + 0.001
    served_but_for_the_floor = explain_ranking(
        service, tenant, TOPIC, first.entry_id, limit=5, min_confidence=min(above, 1.0)
    )
    assert served_but_for_the_floor.verdict == "withheld"
    assert f"{round(first.confidence, 4):.4f}" in served_but_for_the_floor.summary
    outranked = explain_ranking(
        service, tenant, TOPIC, last.entry_id, limit=1, min_confidence=min(above, 1.0)
    )
    assert outranked.verdict == "outranked"  # it could not be served at limit 1 anyway
    assert any("withheld wherever it ranks" in r for r in outranked.reasons)


def test_an_admin_drops_the_recalibration_its_verdicts_made(
    service: MemoryService, tenant: str
) -> None:
    lake(service, tenant)
    hit = service.query_org_memory(tenant, TOPIC).hits[0]
    assert hit.confidence is not None
    for n in range(30):  # five agents' verdicts on the hit they were served
        log_answer(service, tenant, TOPIC, incident_id=f"INC-{n}", caller=f"beacon-{n % 5}")
        service.record_caller_feedback(
            tenant,
            hit.entry_id,
            {"verdict": "helpful" if n < 6 else "misleading", "incident_id": f"INC-{n}"},
            caller=f"beacon-{n % 5}",
        )
    assert Curation(service).settings(tenant).recalibration_verdicts == 30
    moved = service.query_org_memory(tenant, TOPIC).hits[0].confidence
    assert moved != hit.confidence
    service.reset_recalibration(tenant)
    assert Curation(service).settings(tenant).recalibration_verdicts == 0
    assert service.query_org_memory(tenant, TOPIC).hits[0].confidence == hit.confidence


def test_code_ahead_of_migration_0026_answers_and_records_verdicts(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any], tenant: str
) -> None:
    with database_at(database, admin_conn, 25) as urls:
        conn = connect(urls.app)
        try:
            service = MemoryService(MemoryRepository(conn), FakeEmbeddingProvider())
            lake(service, tenant)
            hit = service.query_org_memory(tenant, TOPIC).hits[0]
            assert hit.confidence is not None
            for n in range(31):  # past the recalibration's threshold: never a 500
                outcome = service.record_caller_feedback(
                    tenant,
                    hit.entry_id,
                    {
                        "verdict": "helpful" if n % 3 else "misleading",
                        "incident_id": f"INC-{n}",
                        "confidence": hit.confidence,
                    },
                    caller=f"beacon-{n}",
                )
                assert outcome.applied
            with pytest.raises(StoreUnavailableError, match="migration 0026"):
                service.set_min_confidence(tenant, 0.2)
            with pytest.raises(StoreUnavailableError, match="migration 0026"):
                service.reset_recalibration(tenant)
            assert service.query_org_memory(tenant, TOPIC).hits  # answers on
        finally:
            conn.close()
