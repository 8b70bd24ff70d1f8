"""The admin API's entry routes: create, read, correct, retire, redact, promote; an
entry's recurrences, split and merge policy; its history; merge and distinct verdicts.
"""

from typing import Any
from uuid import UUID

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from functions.admin_api.common import write_context, written
from grandbo.api.admin_models import (
    CorrectEntryRequest,
    CreateEntryRequest,
    DistinctRequest,
    MergePolicyRequest,
    MergeRequest,
    RedactionRequest,
    RetireEntryRequest,
)
from grandbo.api.auth import Caller
from grandbo.memory.curation.curator import Curation
from grandbo.memory.domain.models import Origin
from grandbo.observability import tracer
from grandbo.runtime.lambda_container import runtime

router = APIGatewayRouter()  # type: ignore[no-untyped-call]


@router.post("/v1/admin/entries")
@tracer.capture_method
def create_entry(request: CreateEntryRequest) -> Response[Any]:
    caller: Caller = router.context["caller"]
    entry = {**request.model_dump(), "origin": Origin.ADMIN}
    outcome = (
        runtime().service().record_entry(caller.tenant_id, entry, write_context(router, "create"))
    )
    return written(outcome, 201, created=True)


@router.get("/v1/admin/entries/<entry_id>")
def get_entry(entry_id: UUID) -> dict[str, Any]:
    caller: Caller = router.context["caller"]
    return runtime().service().get_entry(caller.tenant_id, entry_id).model_dump(mode="json")


@router.post("/v1/admin/entries/<entry_id>/corrections")
@tracer.capture_method
def correct_entry(entry_id: UUID, request: CorrectEntryRequest) -> Response[Any]:
    caller: Caller = router.context["caller"]
    # what it does not name it keeps (the service included: `"service": null` clears it)
    text = request.model_dump(exclude={"expected_revision"}, exclude_unset=True)
    outcome = (
        runtime()
        .service()
        .correct_entry(
            caller.tenant_id,
            entry_id,
            text,
            write_context(router, "correct", str(entry_id)),
            expected_revision=request.expected_revision,
        )
    )
    return written(outcome, 201)


@router.post("/v1/admin/entries/<entry_id>/retirement")
@tracer.capture_method
def retire_entry(entry_id: UUID, request: RetireEntryRequest) -> Response[Any]:
    caller: Caller = router.context["caller"]
    outcome = (
        runtime()
        .service()
        .retire_entry(
            caller.tenant_id,
            entry_id,
            request.reason,
            write_context(router, "retire", str(entry_id)),
            superseded_by=request.superseded_by,
        )
    )
    return written(outcome, 200)


@router.post("/v1/admin/entries/<entry_id>/redaction")
@tracer.capture_method
def redact_entry(entry_id: UUID, request: RedactionRequest) -> Response[Any]:
    """Remove the entry's text for good: its tombstone and the hash of every payload."""
    caller: Caller = router.context["caller"]
    outcome = (
        runtime()
        .service()
        .redact_entry(
            caller.tenant_id,
            entry_id,
            request.reason,
            write_context(router, "redact", str(entry_id)),
            keep_recurrences=request.keep_recurrences,
            also=request.also_remove,
        )
    )
    return Response(
        status_code=200, content_type=content_types.APPLICATION_JSON, body=outcome.model_dump_json()
    )


@router.post("/v1/admin/entries/<entry_id>/promotion")
@tracer.capture_method
def promote_entry(entry_id: UUID) -> Response[Any]:
    """An episodic entry becomes durable: it no longer expires."""
    caller: Caller = router.context["caller"]
    outcome = (
        runtime()
        .service()
        .promote_entry(caller.tenant_id, entry_id, write_context(router, "promote", str(entry_id)))
    )
    return written(outcome, 200)


@router.get("/v1/admin/entries/<entry_id>/recurrences")
def recurrences(entry_id: UUID) -> dict[str, Any]:
    """The latest entries merged into this one as its recurrences, newest first (each can
    be split back out); `seen_count` says how many times the lesson was recorded in all."""
    caller: Caller = router.context["caller"]
    service = runtime().service()
    merged = service.recurrences_of(caller.tenant_id, entry_id)
    return {
        "seen_count": service.get_entry(caller.tenant_id, entry_id).seen_count,
        "entries": [entry.model_dump(mode="json") for entry in merged],
    }


@router.post("/v1/admin/entries/<entry_id>/split")
@tracer.capture_method
def split_recurrence(entry_id: UUID) -> Response[Any]:
    """A wrongly merged recurrence becomes its own entry again, never merged again."""
    caller: Caller = router.context["caller"]
    outcome = (
        runtime()
        .service()
        .split_recurrence(caller.tenant_id, entry_id, write_context(router, "split", str(entry_id)))
    )
    return written(outcome, 200)


@router.post("/v1/admin/entries/<entry_id>/merge-policy")
@tracer.capture_method
def set_merge_policy(entry_id: UUID, request: MergePolicyRequest) -> Response[Any]:
    """`{"never_merge": true}`: nothing is merged into the entry, it is merged into
    nothing, and no hit is collapsed with it; false clears the mark."""
    caller: Caller = router.context["caller"]
    outcome = (
        runtime()
        .service()
        .set_never_merge(
            caller.tenant_id,
            entry_id,
            request.never_merge,
            write_context(router, "merge-policy", str(entry_id), str(request.never_merge).lower()),
        )
    )
    return written(outcome, 200)


@router.get("/v1/admin/entries/<entry_id>/history")
def history(entry_id: UUID) -> dict[str, Any]:
    """The entry, every event of it (each revision's text, who wrote it, through which
    path) and its recurrences."""
    caller: Caller = router.context["caller"]
    return Curation(runtime().service()).history(caller.tenant_id, entry_id).model_dump(mode="json")


@router.post("/v1/admin/entries/<entry_id>/merge")
@tracer.capture_method
def merge(entry_id: UUID, request: MergeRequest) -> Response[Any]:
    """Record the entry as a recurrence of `into` (an event; split reverses it)."""
    caller: Caller = router.context["caller"]
    outcome = Curation(runtime().service()).merge(
        caller.tenant_id,
        entry_id,
        request.into,
        write_context(router, "merge", str(entry_id), str(request.into)),
    )
    return written(outcome, 200)


@router.post("/v1/admin/entries/<entry_id>/distinct")
def mark_distinct(entry_id: UUID, request: DistinctRequest) -> dict[str, Any]:
    """The entry and `other` are two lessons: the pair is not suggested again."""
    caller: Caller = router.context["caller"]
    verdict = Curation(runtime().service()).mark_distinct(
        caller.tenant_id, entry_id, request.other, caller.actor
    )
    return verdict.model_dump(mode="json")
