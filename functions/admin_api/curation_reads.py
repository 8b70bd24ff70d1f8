"""The admin API's reads for curation (the console's): who the caller is, search as
Beacon sees it and "why not this one?", the catalog, the review lists, growth and possible
duplicates, and the retrieval log (its pages, its incidents, a question removed, a verdict
removed).
"""

from typing import Any
from uuid import UUID

from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from functions.admin_api.common import write_context
from grandbo.api.admin_models import (
    CatalogRequest,
    ExplanationRequest,
    NoteRemovalRequest,
    QuestionRemovalRequest,
    RetrievalIncidentsRequest,
    RetrievalsRequest,
    VerdictRemovalRequest,
)
from grandbo.api.auth import Caller
from grandbo.api.models import QueryRequest
from grandbo.memory.curation.curator import Curation
from grandbo.memory.domain.retrieval_log import retrieval_page
from grandbo.memory.read.explanation import explain_ranking
from grandbo.memory.service import MISLEADING_REVIEW_THRESHOLD
from grandbo.observability import tracer
from grandbo.runtime.lambda_container import runtime

router = APIGatewayRouter()  # type: ignore[no-untyped-call]


@router.get("/v1/admin/whoami")
def whoami() -> dict[str, Any]:
    """Who the request's signature says the caller is: organization, actor, role, and how
    it proved it (a key's HMAC or AWS's signature)."""
    caller: Caller = router.context["caller"]
    return {
        "organization": caller.tenant_id,
        "actor": caller.actor,
        "person": caller.person,
        "role": caller.role,
        "via": caller.via,
    }


@router.get("/v1/admin/review")
def entries_for_review() -> dict[str, Any]:
    """Entries investigations called misleading more than the threshold, and lessons the
    topology changed under (`stale`): re-read, correct or retire each."""
    caller: Caller = router.context["caller"]
    service = runtime().service()
    entries = service.entries_for_review(caller.tenant_id)
    stale = Curation(service).stale_lessons(caller.tenant_id)
    return {
        "misleading_more_than": MISLEADING_REVIEW_THRESHOLD,
        "entries": [entry.model_dump(mode="json") for entry in entries],
        "stale": [lesson.model_dump(mode="json") for lesson in stale],
    }


@router.post("/v1/admin/query")
@tracer.capture_method
def query_as_beacon(request: QueryRequest) -> dict[str, Any]:
    """`query_org_memory` for the key's organization, exactly as Beacon's query route
    answers it (the curation console's search)."""
    caller: Caller = router.context["caller"]
    result = runtime().query_org_memory(
        caller.tenant_id,
        request.topic,
        caller=caller.actor,
        incident_id=request.incident_id,
        **request.arguments(),
    )
    return result.model_dump(mode="json")


@router.post("/v1/admin/explanation")
@tracer.capture_method
def explain(request: ExplanationRequest) -> dict[str, Any]:
    """ "Why not this one?": where the entry stands for the query, and why, computed by the
    ranking code itself (`grandbo.memory.read.explanation`)."""
    caller: Caller = router.context["caller"]
    runtime().admit(caller.tenant_id, caller.actor)  # the same search: counted alike
    explanation = explain_ranking(
        runtime().service(),
        caller.tenant_id,
        request.topic,
        request.entry_id,
        **request.arguments(),
    )
    return explanation.model_dump(mode="json")


@router.post("/v1/admin/catalog")
def catalog(request: CatalogRequest) -> dict[str, Any]:
    """A page of the organization's entries by status, kind, origin, service and text."""
    caller: Caller = router.context["caller"]
    page = Curation(runtime().service()).catalog(caller.tenant_id, **request.model_dump())
    return page.model_dump(mode="json")


@router.post("/v1/admin/retrievals")
def retrievals(request: RetrievalsRequest) -> dict[str, Any]:
    """What was asked of memory and what it answered (the retrieval log), newest first: a
    read with its filter in the body, as the topology reads are (the signature covers the
    path and the body; admin routes take no query string)."""
    caller: Caller = router.context["caller"]
    container = runtime()
    container.retrieval_writer.flush(2.0)  # this container's own queries, written first
    page = retrieval_page(
        container.service().repository,
        caller.tenant_id,
        incident_id=request.incident_id,
        unanswered=request.unanswered,
        before=request.before,
        limit=request.limit,
    )
    return page.model_dump(mode="json")


@router.post("/v1/admin/retrievals/<retrieval_id>/removal")
@tracer.capture_method
def remove_question(retrieval_id: UUID, request: QuestionRemovalRequest) -> dict[str, Any]:
    """Remove one question from the retrieval log (a secret someone typed into a topic):
    its removal is recorded with who, when, why and the topic's SHA-256."""
    caller: Caller = router.context["caller"]
    digest = (
        runtime()
        .service()
        .remove_logged_question(
            caller.tenant_id,
            retrieval_id,
            request.reason,
            write_context(router, "remove-question", str(retrieval_id)),
        )
    )
    return {"retrieval_id": str(retrieval_id), "removed": True, "topic_sha256": digest}


@router.post("/v1/admin/verdicts/<verdict_id>/removal")
@tracer.capture_method
def remove_verdict(verdict_id: int, request: VerdictRemovalRequest) -> dict[str, Any]:
    """Remove one verdict (its id is on the incident's page of the retrieval log): it is
    counted no more, the next refit of the organization's confidence forgets it, and who
    removed it, when and why stay (an event). A verdict removed before answers how it was
    removed, `applied` false."""
    caller: Caller = router.context["caller"]
    removed = (
        runtime()
        .service()
        .remove_verdict(
            caller.tenant_id,
            verdict_id,
            request.reason,
            write_context(router, "remove-verdict", str(verdict_id)),
        )
    )
    return removed.model_dump(mode="json")


@router.post("/v1/admin/verdicts/<verdict_id>/note-removal")
@tracer.capture_method
def remove_verdict_note(verdict_id: int, request: NoteRemovalRequest) -> dict[str, Any]:
    """Remove one verdict's note (a secret quoted in it): the verdict stands, its note
    reads "[redacted]"; who removed it, when, why and the note's SHA-256 are recorded."""
    caller: Caller = router.context["caller"]
    digest = (
        runtime()
        .service()
        .remove_verdict_note(
            caller.tenant_id,
            verdict_id,
            request.reason,
            write_context(router, "remove-note", str(verdict_id)),
        )
    )
    return {"verdict_id": verdict_id, "note_removed": True, "note_sha256": digest}


@router.post("/v1/admin/retrievals/incidents")
def retrieval_incidents(request: RetrievalIncidentsRequest) -> dict[str, Any]:
    """The incidents whose agent asked memory (the retrieval log's), the latest first: how
    many questions each asked, how many memory could not answer, and when."""
    caller: Caller = router.context["caller"]
    container = runtime()
    container.retrieval_writer.flush(2.0)
    log = container.service().repository
    incidents = log.retrieval_incidents(caller.tenant_id, request.limit)
    return {"incidents": [incident.model_dump(mode="json") for incident in incidents]}


@router.get("/v1/admin/growth")
def growth() -> dict[str, Any]:
    """Entries created per week by origin, and recurrences per week (26 weeks)."""
    caller: Caller = router.context["caller"]
    return Curation(runtime().service()).growth(caller.tenant_id).model_dump(mode="json")


@router.get("/v1/admin/duplicates")
@tracer.capture_method
def duplicates() -> dict[str, Any]:
    """Pairs the automatic rule leaves apart that a looser one flags, for a person."""
    caller: Caller = router.context["caller"]
    found = Curation(runtime().service()).duplicate_suggestions(caller.tenant_id)
    return found.model_dump(mode="json")
