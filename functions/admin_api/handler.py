"""The signed admin API: create, correct and retire memory entries of the key's tenant.

Every request is verified (HMAC-SHA256 over timestamp, nonce, method, path and the raw
body; 5-minute window; one use per nonce) before routing; the tenant is the signing
key's. `Idempotency-Key` makes a retried create or correction a no-op.
"""

from typing import Any
from uuid import UUID

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.admin_api import people
from grandbo.api.auth import (
    PURGE_CONFIRMATION_S,
    SIGNATURE_WINDOW_S,
    Caller,
    mint_purge_confirmation,
    rows_digest,
    verify_admin_request,
    verify_purge_confirmation,
)
from grandbo.api.http_errors import (
    precheck_body,
    precheck_json,
    proxy_error,
    register_error_handlers,
    store_unavailable,
)
from grandbo.api.iam_people import IAM_PREFIX
from grandbo.api.models import (
    CalibrationRequest,
    CatalogRequest,
    CorrectEntryRequest,
    CreateEntryRequest,
    DistinctRequest,
    ExplanationRequest,
    ExportRequest,
    ImportRequest,
    MergePolicyRequest,
    MergeRequest,
    PurgeConfirmation,
    PurgeRequest,
    QueryRequest,
    QuestionRemovalRequest,
    RedactionRequest,
    RepairRequest,
    RetireEntryRequest,
    RetrievalIncidentsRequest,
    RetrievalsRequest,
    SettingsRequest,
    TopologyNodesRequest,
    TopologyReadRequest,
    TopologyRequest,
)
from grandbo.api.people import may, role_needed
from grandbo.api.resolver import RestResolver
from grandbo.errors import (
    REPLAYED,
    REPLAYED_MESSAGE,
    AuthenticationError,
    ForbiddenError,
    InvalidInputError,
    StoreUnavailableError,
)
from grandbo.memory.curation.audit import audit, repair_requested
from grandbo.memory.curation.curator import Curation
from grandbo.memory.domain.idempotency import KeySpace, caller_key, idempotency_key
from grandbo.memory.domain.models import Origin, WriteContext, WriteOutcome
from grandbo.memory.domain.retrieval_log import retrieval_page
from grandbo.memory.lifecycle.lake import LakeTransfer
from grandbo.memory.read.explanation import explain_ranking
from grandbo.memory.service import MISLEADING_REVIEW_THRESHOLD
from grandbo.observability import bind_request_keys, count_entries_created, logger, metrics, tracer
from grandbo.runtime.after_answer import finishes_after_answer, register_after_answer
from grandbo.runtime.lambda_container import drain_retrievals, runtime, warm_at_init
from grandbo.topology.model import TopologyBatch

NONCE_RETENTION_S = 3 * SIGNATURE_WINDOW_S
_NOT_OUR_PERSON = (
    "this AWS identity is none of Grandbo's people: sign in through IAM Identity Center with "
    "a permission set the stack maps to an organization (docs/OPERATIONS.md)"
)
# a purge's confirmation token is an HMAC of the key that asked for it
_PURGE_NEEDS_A_KEY = (
    "a purge is requested and confirmed with an admin signing key, not an IAM identity"
)

app = RestResolver(enable_validation=True)
# in Lambda, the retrieval log's write finishes after the answer (grandbo.runtime.after_answer)
register_after_answer(drain_retrievals)
register_error_handlers(app)
app.include_router(people.router)
# the console's searches meet the topic's deadline from the first (issue 43)
warm_at_init()


def authenticate(event: APIGatewayProxyEvent) -> Caller:
    """The caller a signed request proves; its nonce is spent only once the signature holds."""
    nonces = runtime().nonces()

    def claim(caller: Caller, nonce: str) -> bool:
        return nonces.claim_nonce(caller.tenant_id, caller.key_id, nonce, NONCE_RETENTION_S)

    raw = event.decoded_body or ""
    return verify_admin_request(
        runtime().keyring(),
        event.headers,
        event.http_method,
        event.path,
        raw.encode("utf-8", "surrogatepass"),
        claim,
    )


def iam_caller(event: dict[str, Any], context: LambdaContext) -> tuple[Caller, dict[str, Any]]:
    """The person of a request API Gateway authorized with AWS's signature (the route's
    authorization type AWS_IAM: the function runs only for a verified identity), and the
    event as the admin routes read it (its path without the /v1/iam prefix). The person's
    role must be of the account this function runs in (its ARN's account field)."""
    identity = (event.get("requestContext") or {}).get("identity") or {}
    account_id = str(context.invoked_function_arn).split(":")[4]
    caller = runtime().iam_people().caller(identity.get("userArn"), account_id)
    path = "/v1" + str(event["path"]).removeprefix(IAM_PREFIX)
    return caller, {**event, "path": path}


def _context(*operation: str) -> WriteContext:
    """Who writes, and the key: the caller's Idempotency-Key for this operation, or the
    request's single-use nonce (a request without a key is never a replay)."""
    caller: Caller = app.context["caller"]
    headers = app.current_event.headers
    key = headers.get("idempotency-key") or headers.get("Idempotency-Key")
    nonce = headers.get("x-grandbo-nonce") or headers.get("X-Grandbo-Nonce") or ""
    if caller.via == "iam":  # no nonce: API Gateway's id of this request is its own
        nonce = app.current_event.request_context.request_id
    if key is None:
        stored = idempotency_key(KeySpace.ADMIN, caller.key_id, "nonce", nonce)
    else:  # each signing key has its own keys: two admin tools never meet by accident
        stored = idempotency_key(KeySpace.ADMIN, caller.key_id, *operation, caller_key(key))
    return WriteContext(actor=caller.actor, idempotency_key=stored)


def _written(outcome: WriteOutcome, status: int, *, created: bool = False) -> Response[Any]:
    if created and outcome.applied:
        count_entries_created(outcome.entry.origin.value, 1)
    if outcome.embed_enqueued is False:
        metrics.add_metric("EnqueueFailures", MetricUnit.Count, 1)
    return Response(
        status_code=status if outcome.applied else 200,
        content_type=content_types.APPLICATION_JSON,
        body=outcome.model_dump_json(),
    )


@app.post("/v1/admin/entries")
@tracer.capture_method
def create_entry(request: CreateEntryRequest) -> Response[Any]:
    caller: Caller = app.context["caller"]
    entry = {**request.model_dump(), "origin": Origin.ADMIN}
    outcome = runtime().service().record_entry(caller.tenant_id, entry, _context("create"))
    return _written(outcome, 201, created=True)


@app.get("/v1/admin/whoami")
def whoami() -> dict[str, Any]:
    """Who the request's signature says the caller is: organization, actor, role, and how
    it proved it (a key's HMAC or AWS's signature)."""
    caller: Caller = app.context["caller"]
    return {
        "organization": caller.tenant_id,
        "actor": caller.actor,
        "person": caller.person,
        "role": caller.role,
        "via": caller.via,
    }


@app.get("/v1/admin/health")
def health() -> dict[str, Any]:
    """The organization's memory health (`grandbo.memory.curation.audit`), read-only: repairs are
    `grandbo audit --repair`, the sweeper and the hourly index job."""
    caller: Caller = app.context["caller"]
    return audit(runtime().service(), caller.tenant_id).as_dict()


@app.post("/v1/admin/health/repair")
@tracer.capture_method
def repair_health(request: RepairRequest) -> dict[str, Any]:
    """Repair the findings named (the projection rebuilt from the events, the expired
    retired, the missing vectors' jobs sent to the embed worker); each says what was done.
    A large organization's rebuild belongs to `grandbo audit --repair` from the VPC."""
    caller: Caller = app.context["caller"]
    health = repair_requested(runtime().service(), caller.tenant_id, request.checks)
    return health.as_dict()


@app.get("/v1/admin/review")
def entries_for_review() -> dict[str, Any]:
    """Entries investigations called misleading more than the threshold, and lessons the
    topology changed under (`stale`): re-read, correct or retire each."""
    caller: Caller = app.context["caller"]
    service = runtime().service()
    entries = service.entries_for_review(caller.tenant_id)
    stale = Curation(service).stale_lessons(caller.tenant_id)
    return {
        "misleading_more_than": MISLEADING_REVIEW_THRESHOLD,
        "entries": [entry.model_dump(mode="json") for entry in entries],
        "stale": [lesson.model_dump(mode="json") for lesson in stale],
    }


@app.get("/v1/admin/entries/<entry_id>")
def get_entry(entry_id: UUID) -> dict[str, Any]:
    caller: Caller = app.context["caller"]
    return runtime().service().get_entry(caller.tenant_id, entry_id).model_dump(mode="json")


@app.post("/v1/admin/entries/<entry_id>/corrections")
@tracer.capture_method
def correct_entry(entry_id: UUID, request: CorrectEntryRequest) -> Response[Any]:
    caller: Caller = app.context["caller"]
    # what it does not name it keeps (the service included: `"service": null` clears it)
    text = request.model_dump(exclude={"expected_revision"}, exclude_unset=True)
    outcome = (
        runtime()
        .service()
        .correct_entry(
            caller.tenant_id,
            entry_id,
            text,
            _context("correct", str(entry_id)),
            expected_revision=request.expected_revision,
        )
    )
    return _written(outcome, 201)


@app.post("/v1/admin/entries/<entry_id>/retirement")
@tracer.capture_method
def retire_entry(entry_id: UUID, request: RetireEntryRequest) -> Response[Any]:
    caller: Caller = app.context["caller"]
    outcome = (
        runtime()
        .service()
        .retire_entry(
            caller.tenant_id,
            entry_id,
            request.reason,
            _context("retire", str(entry_id)),
            superseded_by=request.superseded_by,
        )
    )
    return _written(outcome, 200)


@app.post("/v1/admin/entries/<entry_id>/redaction")
@tracer.capture_method
def redact_entry(entry_id: UUID, request: RedactionRequest) -> Response[Any]:
    """Remove the entry's text for good: its tombstone and the hash of every payload."""
    caller: Caller = app.context["caller"]
    outcome = (
        runtime()
        .service()
        .redact_entry(
            caller.tenant_id,
            entry_id,
            request.reason,
            _context("redact", str(entry_id)),
            keep_recurrences=request.keep_recurrences,
        )
    )
    return Response(
        status_code=200, content_type=content_types.APPLICATION_JSON, body=outcome.model_dump_json()
    )


@app.post("/v1/admin/entries/<entry_id>/promotion")
@tracer.capture_method
def promote_entry(entry_id: UUID) -> Response[Any]:
    """An episodic entry becomes durable: it no longer expires."""
    caller: Caller = app.context["caller"]
    outcome = (
        runtime()
        .service()
        .promote_entry(caller.tenant_id, entry_id, _context("promote", str(entry_id)))
    )
    return _written(outcome, 200)


@app.get("/v1/admin/entries/<entry_id>/recurrences")
def recurrences(entry_id: UUID) -> dict[str, Any]:
    """The latest entries merged into this one as its recurrences, newest first (each can
    be split back out); `seen_count` says how many times the lesson was recorded in all."""
    caller: Caller = app.context["caller"]
    service = runtime().service()
    merged = service.recurrences_of(caller.tenant_id, entry_id)
    return {
        "seen_count": service.get_entry(caller.tenant_id, entry_id).seen_count,
        "entries": [entry.model_dump(mode="json") for entry in merged],
    }


@app.post("/v1/admin/entries/<entry_id>/split")
@tracer.capture_method
def split_recurrence(entry_id: UUID) -> Response[Any]:
    """A wrongly merged recurrence becomes its own entry again, never merged again."""
    caller: Caller = app.context["caller"]
    outcome = (
        runtime()
        .service()
        .split_recurrence(caller.tenant_id, entry_id, _context("split", str(entry_id)))
    )
    return _written(outcome, 200)


@app.post("/v1/admin/entries/<entry_id>/merge-policy")
@tracer.capture_method
def set_merge_policy(entry_id: UUID, request: MergePolicyRequest) -> Response[Any]:
    """`{"never_merge": true}`: nothing is merged into the entry, it is merged into
    nothing, and no hit is collapsed with it; false clears the mark."""
    caller: Caller = app.context["caller"]
    outcome = (
        runtime()
        .service()
        .set_never_merge(
            caller.tenant_id,
            entry_id,
            request.never_merge,
            _context("merge-policy", str(entry_id), str(request.never_merge).lower()),
        )
    )
    return _written(outcome, 200)


@app.post("/v1/admin/calibration")
@tracer.capture_method
def calibrate(request: CalibrationRequest) -> dict[str, Any]:
    """Measure the organization's vector cutoff on its own lake (no labels), keep it for
    its queries, and report it (`grandbo.memory.vectors.cutoff`)."""
    caller: Caller = app.context["caller"]
    report = runtime().service().calibrate(caller.tenant_id, sample=request.sample)
    return report.as_dict()


@app.get("/v1/admin/settings")
def settings() -> dict[str, Any]:
    """The organization's settings: the episodic lifetime, and the vector cutoff in force
    beside the model's own."""
    caller: Caller = app.context["caller"]
    return Curation(runtime().service()).settings(caller.tenant_id).model_dump(mode="json")


@app.post("/v1/admin/settings")
@tracer.capture_method
def update_settings(request: SettingsRequest) -> dict[str, Any]:
    """How long new episodic entries are served (days from their creation), and the
    confidence floor of the organization's answers; answers the settings in force."""
    caller: Caller = app.context["caller"]
    service = runtime().service()
    if request.episodic_ttl_days is not None:
        service.set_episodic_ttl_days(caller.tenant_id, request.episodic_ttl_days)
    if request.retrieval_days is not None:
        service.set_retrieval_days(caller.tenant_id, request.retrieval_days)
    if request.min_confidence is not None or request.reset_min_confidence:
        service.set_min_confidence(caller.tenant_id, request.min_confidence)
    if request.reset_recalibration:
        service.reset_recalibration(caller.tenant_id)
    if request.query_rate_per_minute is not None or request.retrieval_rows_per_day is not None:
        service.set_log_bounds(
            caller.tenant_id,
            query_rate_per_minute=request.query_rate_per_minute,
            retrieval_rows_per_day=request.retrieval_rows_per_day,
        )
    return Curation(service).settings(caller.tenant_id).model_dump(mode="json")


@app.post("/v1/admin/topology")
@tracer.capture_method
def record_topology(request: TopologyRequest) -> dict[str, Any]:
    """Upsert nodes and edges of one namespace; `"sync": true` closes what the batch lacks."""
    caller: Caller = app.context["caller"]
    batch = TopologyBatch.model_validate(request.model_dump(exclude={"sync"}))
    return runtime().topology().record(caller.tenant_id, batch, sync=request.sync)


def _reach(request: TopologyReadRequest, *, dependencies: bool) -> dict[str, Any]:
    caller: Caller = app.context["caller"]
    topology = runtime().topology()
    walk = topology.dependencies if dependencies else topology.blast_radius
    reached = walk(
        caller.tenant_id,
        request.type,
        request.id,
        hops=request.hops,
        as_of=request.as_of,
        namespaces=request.namespaces,
    )
    return reached.model_dump(mode="json")


@app.post("/v1/admin/topology/blast-radius")
def admin_blast_radius(request: TopologyReadRequest) -> dict[str, Any]:
    """What the query route's blast radius answers, for the key's organization."""
    return _reach(request, dependencies=False)


@app.post("/v1/admin/topology/criticality")
def admin_criticality(request: TopologyReadRequest) -> dict[str, Any]:
    """What the query route's criticality answers, for the key's organization."""
    caller: Caller = app.context["caller"]
    result = (
        runtime()
        .topology()
        .criticality(
            caller.tenant_id,
            request.type,
            request.id,
            as_of=request.as_of,
            namespaces=request.namespaces,
        )
    )
    return result.model_dump(mode="json")


@app.post("/v1/admin/topology/dependencies")
def admin_dependencies(request: TopologyReadRequest) -> dict[str, Any]:
    """What the node depends on, nearest first (`affected`), for the key's organization."""
    return _reach(request, dependencies=True)


@app.post("/v1/admin/topology/nodes")
def admin_topology_nodes(request: TopologyNodesRequest) -> dict[str, Any]:
    """The organization's topology nodes by type and id (the console's service list)."""
    caller: Caller = app.context["caller"]
    nodes = (
        runtime().topology().node_list(caller.tenant_id, as_of=request.as_of, limit=request.limit)
    )
    return {"nodes": [node.model_dump(mode="json") for node in nodes]}


@app.post("/v1/admin/purge")
@tracer.capture_method
def request_purge(request: PurgeRequest) -> dict[str, Any]:
    """Step one of offboarding: what a purge would delete, and its confirmation token."""
    caller: Caller = app.context["caller"]
    if caller.via == "iam":
        raise InvalidInputError("organization", _PURGE_NEEDS_A_KEY)
    if request.organization != caller.tenant_id:
        raise InvalidInputError("organization", "must name the organization this key belongs to")
    key = runtime().keyring().find(caller.key_id, "admin")
    rows, last_event = runtime().service().purge_state(caller.tenant_id)
    return {
        "organization": caller.tenant_id,
        "rows": rows,
        "last_event_id": last_event,
        "confirmation": mint_purge_confirmation(key, rows_digest(rows, last_event)),
        "confirm_within_s": PURGE_CONFIRMATION_S,
    }


@app.post("/v1/admin/purge/confirmation")
@tracer.capture_method
def confirm_purge(request: PurgeConfirmation) -> dict[str, Any]:
    """Step two: every row of the organization deleted, events included, and counted."""
    caller: Caller = app.context["caller"]
    if caller.via == "iam":
        raise InvalidInputError("organization", _PURGE_NEEDS_A_KEY)
    key = runtime().keyring().find(caller.key_id, "admin")
    rows, last_event = runtime().service().purge_state(caller.tenant_id)
    try:
        verify_purge_confirmation(key, request.confirmation, rows_digest(rows, last_event))
    except AuthenticationError as exc:
        raise InvalidInputError(
            "confirmation", f"{exc.reason}: request the purge again (POST /v1/admin/purge)"
        ) from exc
    # this container's retrievals asked before the purge are written before it, not after
    runtime().retrieval_writer.flush(2.0)
    deleted = runtime().service().purge_organization(caller.tenant_id)
    logger.warning("organization purged", extra={"deleted": deleted})
    return {"organization": caller.tenant_id, "deleted": deleted}


@app.post("/v1/admin/export")
@tracer.capture_method
def export_lake(request: ExportRequest) -> dict[str, Any]:
    """One page of the organization's event log, in event-id order; the last page
    (`next` null) carries the manifest (`grandbo.memory.domain.lake_stream`)."""
    caller: Caller = app.context["caller"]
    transfer = LakeTransfer(runtime().service())
    return transfer.export_page(caller.tenant_id, request.after, request.limit).as_dict()


@app.post("/v1/admin/import")
@tracer.capture_method
def import_lake(request: ImportRequest) -> dict[str, Any]:
    """One batch of a lake stream, checked against its manifest before anything of it is
    stored; the last batch rebuilds the projection and sends the embed jobs."""
    caller: Caller = app.context["caller"]
    outcome = LakeTransfer(runtime().service()).import_batch(
        caller.tenant_id,
        request.manifest,
        request.offset,
        request.chain_sha256,
        request.rest_sha256,
        request.events,
        rename=request.rename,
        merge=request.merge,
    )
    return outcome.as_dict()


# -- curation: what the console reads (grandbo.console), and the verdicts on pairs -------


@app.post("/v1/admin/query")
@tracer.capture_method
def query_as_beacon(request: QueryRequest) -> dict[str, Any]:
    """`query_org_memory` for the key's organization, exactly as Beacon's query route
    answers it (the curation console's search)."""
    caller: Caller = app.context["caller"]
    result = runtime().query_org_memory(
        caller.tenant_id,
        request.topic,
        caller=caller.actor,
        incident_id=request.incident_id,
        **request.arguments(),
    )
    return result.model_dump(mode="json")


@app.post("/v1/admin/explanation")
@tracer.capture_method
def explain(request: ExplanationRequest) -> dict[str, Any]:
    """ "Why not this one?": where the entry stands for the query, and why, computed by the
    ranking code itself (`grandbo.memory.read.explanation`)."""
    caller: Caller = app.context["caller"]
    explanation = explain_ranking(
        runtime().service(),
        caller.tenant_id,
        request.topic,
        request.entry_id,
        **request.arguments(),
    )
    return explanation.model_dump(mode="json")


@app.post("/v1/admin/catalog")
def catalog(request: CatalogRequest) -> dict[str, Any]:
    """A page of the organization's entries by status, kind, origin, service and text."""
    caller: Caller = app.context["caller"]
    page = Curation(runtime().service()).catalog(caller.tenant_id, **request.model_dump())
    return page.model_dump(mode="json")


@app.post("/v1/admin/retrievals")
def retrievals(request: RetrievalsRequest) -> dict[str, Any]:
    """What was asked of memory and what it answered (the retrieval log), newest first: a
    read with its filter in the body, as the topology reads are (the signature covers the
    path and the body; admin routes take no query string)."""
    caller: Caller = app.context["caller"]
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


@app.post("/v1/admin/retrievals/<retrieval_id>/removal")
@tracer.capture_method
def remove_question(retrieval_id: UUID, request: QuestionRemovalRequest) -> dict[str, Any]:
    """Remove one question from the retrieval log (a secret someone typed into a topic):
    its removal is recorded with who, when, why and the topic's SHA-256."""
    caller: Caller = app.context["caller"]
    digest = (
        runtime()
        .service()
        .remove_logged_question(
            caller.tenant_id,
            retrieval_id,
            request.reason,
            _context("remove-question", str(retrieval_id)),
        )
    )
    return {"retrieval_id": str(retrieval_id), "removed": True, "topic_sha256": digest}


@app.post("/v1/admin/retrievals/incidents")
def retrieval_incidents(request: RetrievalIncidentsRequest) -> dict[str, Any]:
    """The incidents whose agent asked memory (the retrieval log's), the latest first: how
    many questions each asked, how many memory could not answer, and when."""
    caller: Caller = app.context["caller"]
    container = runtime()
    container.retrieval_writer.flush(2.0)
    log = container.service().repository
    incidents = log.retrieval_incidents(caller.tenant_id, request.limit)
    return {"incidents": [incident.model_dump(mode="json") for incident in incidents]}


@app.get("/v1/admin/entries/<entry_id>/history")
def history(entry_id: UUID) -> dict[str, Any]:
    """The entry, every event of it (each revision's text, who wrote it, through which
    path) and its recurrences."""
    caller: Caller = app.context["caller"]
    return Curation(runtime().service()).history(caller.tenant_id, entry_id).model_dump(mode="json")


@app.get("/v1/admin/growth")
def growth() -> dict[str, Any]:
    """Entries created per week by origin, and recurrences per week (26 weeks)."""
    caller: Caller = app.context["caller"]
    return Curation(runtime().service()).growth(caller.tenant_id).model_dump(mode="json")


@app.get("/v1/admin/duplicates")
@tracer.capture_method
def duplicates() -> dict[str, Any]:
    """Pairs the automatic rule leaves apart that a looser one flags, for a person."""
    caller: Caller = app.context["caller"]
    found = Curation(runtime().service()).duplicate_suggestions(caller.tenant_id)
    return found.model_dump(mode="json")


@app.post("/v1/admin/entries/<entry_id>/merge")
@tracer.capture_method
def merge(entry_id: UUID, request: MergeRequest) -> Response[Any]:
    """Record the entry as a recurrence of `into` (an event; split reverses it)."""
    caller: Caller = app.context["caller"]
    outcome = Curation(runtime().service()).merge(
        caller.tenant_id,
        entry_id,
        request.into,
        _context("merge", str(entry_id), str(request.into)),
    )
    return _written(outcome, 200)


@app.post("/v1/admin/entries/<entry_id>/distinct")
def mark_distinct(entry_id: UUID, request: DistinctRequest) -> dict[str, Any]:
    """The entry and `other` are two lessons: the pair is not suggested again."""
    caller: Caller = app.context["caller"]
    verdict = Curation(runtime().service()).mark_distinct(
        caller.tenant_id, entry_id, request.other, caller.actor
    )
    return verdict.model_dump(mode="json")


@finishes_after_answer
@logger.inject_lambda_context(
    correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True
)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    bind_request_keys()  # nothing of the previous invocation's caller
    rejected = precheck_body(event)
    if rejected is not None:
        return rejected
    if event.get("queryStringParameters"):
        # the signature covers the path, not a query string: admin routes take none
        return proxy_error(400, "invalid_request", "admin routes take no query string", "query")
    # Authenticate before routing or validation: an unsigned caller learns nothing else.
    try:
        if str(event.get("path", "")).startswith(f"{IAM_PREFIX}/admin/"):
            try:
                caller, event = iam_caller(event, context)
            except AuthenticationError as exc:  # verified by AWS, but none of our people
                logger.warning("IAM caller not mapped", extra={"reason": exc.reason})
                return proxy_error(403, "forbidden", _NOT_OUR_PERSON)
        else:
            caller = authenticate(APIGatewayProxyEvent(event))
    except AuthenticationError as exc:
        logger.warning("admin request not authenticated", extra={"reason": exc.reason})
        if exc.reason == REPLAYED:  # its signature held: its sender is told what to do
            return proxy_error(401, "replayed", REPLAYED_MESSAGE)
        return proxy_error(401, "unauthorized", "the request is not authenticated")
    except StoreUnavailableError:
        logger.exception("database unavailable while checking the nonce")
        return store_unavailable()
    bind_request_keys(tenant_id=caller.tenant_id, key_id=caller.key_id)
    method, path = event.get("httpMethod", ""), event.get("path", "")
    needed = role_needed(method, path)
    if not may(caller.role, needed):
        # before validation: a person learns what they may not do, not how to shape it
        logger.info("admin request beyond the caller's role", extra={"role": caller.role})
        return proxy_error(
            403, "forbidden", str(ForbiddenError(caller.role, needed, f"{method} {path}"))
        )
    rejected = precheck_json(event)
    if rejected is not None:
        return rejected
    app.append_context(caller=caller)  # type: ignore[no-untyped-call]
    return app.resolve(event, context)
