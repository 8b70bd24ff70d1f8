"""The MCP server: Grandbo's reads as Model Context Protocol tools (the official SDK).

Tools: `query_org_memory`, `get_memory_entry`, `blast_radius`, `criticality`. Each has a
description a model can act on, a typed input schema and structured output (the domain's
own models, the same documents the HTTP API returns).

The tenant never comes from a tool argument. Over stdio it is fixed when the server
starts (`--tenant`, or the remote API's token). Over streamable HTTP the server is a
multi-tenant door: every request carries a query token (the HTTP API's `gbq1` tokens),
the SDK's bearer middleware refuses a request without a valid one, and each call reads
the tenant the token's key is bound to; `/metrics` counts that tenant's calls only.

Arguments are validated as strictly as the HTTP API validates its bodies: with the API's
own request models where it has one (a `limit` of `true`, `"3"` or `2.0` is refused, not
coerced), and with strict types elsewhere.
"""

from __future__ import annotations

import http.client
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar
from uuid import UUID

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, StrictInt, StrictStr, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse

from grandbo.agent.answer_text import (
    answer_text,
    blast_radius_text,
    criticality_text,
    structured_answer,
)
from grandbo.agent.backends import STDIO_CALLER, MemoryBackend
from grandbo.agent.stdio import answering_every_request
from grandbo.api.auth import Keyring, verify_query_token
from grandbo.api.call_metrics import CallMetrics
from grandbo.api.client import GrandboHTTPError
from grandbo.api.models import FeedbackRequest, QueryRequest
from grandbo.errors import (
    AuthenticationError,
    EntryNotFoundError,
    GrandboError,
    InvalidInputError,
    RateLimitedError,
    StoreUnavailableError,
    invalid_input_from,
)
from grandbo.memory.domain.models import Feedback, FeedbackCounts, MemoryEntry, MemoryQueryResult
from grandbo.memory.domain.topic import GUIDANCE
from grandbo.memory.read.recall import DEFAULT_LIMIT
from grandbo.runtime.lambda_container import ContainersBusyError
from grandbo.topology.model import BlastRadius, Criticality, Namespaces

logger = logging.getLogger("grandbo.mcp")

TENANT_CLAIM = "tenant_id"
QUERY_SCOPE = "query"
TOOLS = ("query_org_memory", "get_memory_entry", "blast_radius", "criticality", "record_feedback")

INSTRUCTIONS = (
    "Grandbo is the organization's memory of past incidents: corroborated root causes and "
    "mitigations that worked, written when incidents closed or by admins. Before raising a "
    "hypothesis, ask query_org_memory with a sentence about what you have found. Treat "
    "every hit as a hint from a past incident, not ground truth: verify it against live "
    "telemetry before relying on it. blast_radius and criticality read the service graph."
)

QUERY_DESCRIPTION = f"""Have we seen this before? Searches the organization's memory of past
incidents (corroborated root causes and mitigations that worked) for entries relevant to what the
investigation has found so far, best first.

`topic` must be a sentence: the symptom, the suspected mechanism and the affected
component. A slug (checkout-api-slow-queries), a few keywords or an incident title is
refused with an explanation; rewrite it as a sentence and ask again. Guidance: {GUIDANCE}.

`service` keeps entries of one service; with it, `scope` widens the search through the
service graph: `blast_radius` adds the services that depend on it, `dependencies` the
services it depends on (up to 3 hops), `correlated` the services that failed together
with it in past incidents. `as_of` (an incident's start) reads the scope and staleness
from the service graph as it was then.

A hit whose service the service graph has since retired or renamed, or whose named
dependency is gone, carries `staleness`: its `note` says what changed and when. Such a
lesson describes the system as it was; check it against the current one.

Each hit has `title`, `summary`, `age_days` and `why`: `shared_tags` are the tags the topic
and the entry share, `lexical_rank` and `vector_rank` its rank in the tag search and the
text-similarity search (null when that search did not find it), `fused_score` the score
hits are ordered by, 0-1: every candidate is scored on both searches, 1.0 being the best
on both; it orders one answer's hits and says nothing across answers. `confidence` (0-1)
is the estimated probability that the hit is relevant, comparable across queries: a
hit under the confidence floor (`min_confidence`, default the organization's) is not
returned. An answer with no hit from a complete search means memory holds nothing close
(the text says so; treat the problem as new). When the search was degraded
(`metadata.searched` keywords_only: meaning search was unavailable; partial: some entries
are not embedded yet), the hits are keyword matches scored for that situation, and the
text says what could not be searched: an empty degraded answer is not evidence that the
problem is new. A hit is a hint, not ground truth: verify it with live tools."""

ENTRY_DESCRIPTION = """One memory entry by its id (a hit's `entry_id`): the full text, its
revision and status (active, retired, superseded), its origin and incident. Only entries of
the caller's organization exist here."""

BLAST_RADIUS_DESCRIPTION = """What is affected if `service` fails: every service that
depends on it, directly or transitively, up to `hops` (1-3) away, nearest first, each with
its distance and one dependency path. Read from the service graph (the topology tier)."""

CRITICALITY_DESCRIPTION = """How critical `service` is in the service graph: the sum of
1/distance over every service that depends on it (`basis`: reverse_reachability), or its
degree when nothing depends on it (`basis`: degree). Higher means more of the system
breaks when it does."""

FEEDBACK_DESCRIPTION = """After the investigation an entry served: was it helpful,
not_helpful, or misleading (it pointed the wrong way)? Name the incident investigated
(`incident_id`) and, optionally, say why in `note`. Verdicts are counted on the entry and
shown on later hits; entries called misleading repeatedly go to an admin for review. A
repeated call with the same entry, incident and verdict counts once."""

NAMESPACES = (
    "topology: the dependency graph; learned: the services that failed together in past "
    "incidents; both"
)

TenantResolver = Callable[[], str | None]
Result = TypeVar("Result")


def _api_field(model: type[BaseModel], field: str) -> Any:
    """A field's type in an HTTP API request model, its constraints included."""
    return model.model_fields[field].rebuild_annotation()


# The tools take the API's own field types (strict, with its bounds), so the schema they
# advertise and what the SDK accepts cannot drift from the API; mypy sees the plain types.
if TYPE_CHECKING:
    QueryTopic = str
    QueryLimit = int
    QueryService = str | None
    QueryScope = str | None
    QueryAsOf = datetime | None
    QueryFloor = float | None
    Verdict = str
    IncidentId = str
    FeedbackNote = str | None
    ServedConfidence = float | None
else:
    QueryTopic = _api_field(QueryRequest, "topic")
    QueryLimit = _api_field(QueryRequest, "limit")
    QueryService = _api_field(QueryRequest, "service")
    QueryScope = _api_field(QueryRequest, "scope")
    QueryAsOf = _api_field(QueryRequest, "as_of")
    QueryFloor = _api_field(QueryRequest, "min_confidence")
    Verdict = _api_field(FeedbackRequest, "verdict")
    IncidentId = _api_field(FeedbackRequest, "incident_id")
    FeedbackNote = _api_field(FeedbackRequest, "note")
    ServedConfidence = _api_field(FeedbackRequest, "confidence")


class KeyringTokenVerifier:
    """The SDK's TokenVerifier over Grandbo's query tokens: a `gbq1` token signed by a
    key of the keyring with the query role, not expired. Its key's tenant is a claim."""

    def __init__(self, keyring: Callable[[], Keyring]) -> None:
        self._keyring = keyring

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            caller = verify_query_token(self._keyring(), f"Bearer {token}")
        except AuthenticationError as exc:
            logger.info("MCP request refused: %s", exc.reason)
            return None
        return AccessToken(
            token=token,
            client_id=caller.key_id,
            scopes=[QUERY_SCOPE],
            expires_at=int(token.split(".")[2]),
            claims={TENANT_CLAIM: caller.tenant_id},
        )


def caller_identity() -> str:
    """Who asks and judges through this door: the query token's key id (the identity the
    query API logs and counts the same key by: one asker over HTTP and MCP, issue 50), or
    the stdio door's own name."""
    token = get_access_token()
    return token.client_id if token is not None else STDIO_CALLER


def fixed_tenant(tenant: str | None) -> TenantResolver:
    """Stdio: the tenant named at start-up (None: the remote API's token names it)."""
    return lambda: tenant


def token_tenant() -> str:
    """Streamable HTTP: the tenant of the token that authenticated this request."""
    tenant = _authenticated_tenant()
    if tenant is None:
        raise ToolError("unauthenticated: this request carries no valid query token")
    return tenant


def _authenticated_tenant() -> str | None:
    token = get_access_token()
    tenant = (token.claims or {}).get(TENANT_CLAIM) if token is not None else None
    return tenant if isinstance(tenant, str) and tenant else None


class FeedbackArguments(FeedbackRequest):
    """`record_feedback`'s arguments: the HTTP API's feedback body and the entry it rates
    (in the API, the entry is the path)."""

    entry_id: UUID


# the API's request models, so a tool takes exactly what the API's body takes
ARGUMENT_MODELS: dict[str, type[BaseModel]] = {
    "query_org_memory": QueryRequest,
    "record_feedback": FeedbackArguments,
}


class GrandboMCPServer(MCPServer):
    """The SDK's server, with arguments checked against the API's models first, those it
    refuses worded like every other bad input (the field and the problem, no
    validation-library dump) and counted in the metrics; and a stdio transport that
    answers every request it read."""

    def __init__(
        self, *args: Any, metrics: ToolMetrics, tenant_of: TenantResolver, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.metrics = metrics
        self.tenant_of = tenant_of

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            model = ARGUMENT_MODELS.get(name)
            if model is not None:
                model.model_validate(arguments)
            return await super().call_tool(name, arguments, context)
        except ValidationError as exc:
            raise self._refused(name, exc) from None
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            raise self._refused(name, exc.__cause__) from None

    def _refused(self, name: str, exc: ValidationError) -> ToolError:
        problem = invalid_input_from(exc)
        if name in TOOLS:
            try:
                tenant = self.tenant_of()
            except ToolError:
                tenant = None
            self.metrics.of(tenant, name).record("invalid_input", 0, 0.0)
        return ToolError(f"invalid {problem.field}: {problem.message}")

    async def run_stdio_async(self) -> None:
        async with (
            stdio_server() as (stdin, stdout),
            answering_every_request(stdin, stdout) as (reads, writes),
        ):
            server = self._lowlevel_server
            await server.run(reads, writes, server.create_initialization_options())


class ToolMetrics:
    """Per tenant and tool: calls, results returned (hits, affected services), outcomes,
    latency. A tenant reads its own counts only."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tenants: dict[str | None, dict[str, CallMetrics]] = {}

    def of(self, tenant: str | None, tool: str) -> CallMetrics:
        with self._lock:
            tools = self._tenants.get(tenant)
            if tools is None:
                tools = self._tenants[tenant] = {name: CallMetrics() for name in TOOLS}
        return tools[tool]

    def snapshot(self, tenant: str | None) -> dict[str, object]:
        with self._lock:
            tools = self._tenants.get(tenant) or {name: CallMetrics() for name in TOOLS}
        return {name: metrics.snapshot() for name, metrics in tools.items()}


def build_server(
    backend: MemoryBackend,
    tenant_of: TenantResolver,
    *,
    metrics: ToolMetrics | None = None,
    verifier: KeyringTokenVerifier | None = None,
    issuer_url: str = "http://127.0.0.1",
) -> MCPServer:
    """The MCP server over `backend`. With `verifier`, its HTTP app requires a query
    token on every request (pass `token_tenant` as `tenant_of` then)."""
    counters = metrics or ToolMetrics()
    server = GrandboMCPServer(
        "grandbo",
        metrics=counters,
        tenant_of=tenant_of,
        title="Grandbo organizational memory",
        instructions=INSTRUCTIONS,
        version="1",
        token_verifier=verifier,
        auth=(
            AuthSettings(
                issuer_url=issuer_url,  # type: ignore[arg-type]  # pydantic coerces
                resource_server_url=None,
                required_scopes=[QUERY_SCOPE],
            )
            if verifier is not None
            else None
        ),
        log_level="WARNING",
    )
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    def call(
        name: str, work: Callable[[str | None], Result], size: Callable[[Result], int]
    ) -> Result:
        started = time.perf_counter()
        outcome, returned, tenant = "error", 0, None
        try:
            tenant = tenant_of()
            result = work(tenant)
            outcome, returned = "ok", size(result)
            return result
        except ToolError:
            outcome = "unauthenticated"
            raise
        except Exception as exc:
            outcome, error = _tool_error(exc)
            raise error from None
        finally:
            latency_ms = (time.perf_counter() - started) * 1000
            counters.of(tenant, name).record(outcome, returned, latency_ms)

    @server.tool(description=QUERY_DESCRIPTION, annotations=read_only)
    def query_org_memory(
        topic: Annotated[
            QueryTopic,
            Field(description="a sentence: symptom, suspected mechanism, affected component"),
        ],
        limit: Annotated[QueryLimit, Field(description="at most this many hits")] = DEFAULT_LIMIT,
        service: Annotated[
            QueryService, Field(description="keep entries of this service (e.g. checkout-api)")
        ] = None,
        scope: Annotated[
            QueryScope, Field(description="with `service`: widen through the service graph")
        ] = None,
        as_of: Annotated[
            QueryAsOf, Field(description="read the service graph as it was at this moment")
        ] = None,
        min_confidence: Annotated[
            QueryFloor,
            Field(description="withhold hits under this confidence (default: the floor set)"),
        ] = None,
        incident_id: Annotated[
            IncidentId | None,
            Field(description="your current incident: the question is logged under it"),
        ] = None,
    ) -> Annotated[CallToolResult, MemoryQueryResult]:
        result = call(
            "query_org_memory",
            lambda tenant: backend.query(
                tenant,
                topic,
                limit,
                service,
                scope,
                as_of,
                min_confidence,
                incident_id,
                caller=caller_identity(),
            ),
            lambda result: len(result.hits),
        )
        return CallToolResult(
            content=[TextContent(type="text", text=answer_text(result))],
            structured_content=structured_answer(result),
        )

    @server.tool(description=ENTRY_DESCRIPTION, annotations=read_only)
    def get_memory_entry(
        entry_id: Annotated[UUID, Field(description="a hit's entry_id")],
    ) -> MemoryEntry:
        return call("get_memory_entry", lambda tenant: backend.entry(tenant, entry_id), _one)

    @server.tool(description=BLAST_RADIUS_DESCRIPTION, annotations=read_only)
    def blast_radius(
        service: Annotated[StrictStr, Field(min_length=1, max_length=300, description="a service")],
        hops: Annotated[StrictInt, Field(ge=1, le=3, description="how far to follow")] = 3,
        namespaces: Annotated[Namespaces, Field(description=NAMESPACES)] = Namespaces.TOPOLOGY,
    ) -> Annotated[CallToolResult, BlastRadius]:
        radius = call(
            "blast_radius",
            lambda tenant: backend.blast_radius(tenant, service, hops, namespaces),
            lambda result: len(result.affected),
        )
        return CallToolResult(
            content=[TextContent(type="text", text=blast_radius_text(radius))],
            structured_content=radius.model_dump(mode="json"),
        )

    @server.tool(description=CRITICALITY_DESCRIPTION, annotations=read_only)
    def criticality(
        service: Annotated[StrictStr, Field(min_length=1, max_length=300, description="a service")],
        namespaces: Annotated[Namespaces, Field(description=NAMESPACES)] = Namespaces.TOPOLOGY,
    ) -> Annotated[CallToolResult, Criticality]:
        found = call(
            "criticality", lambda tenant: backend.criticality(tenant, service, namespaces), _one
        )
        return CallToolResult(
            content=[TextContent(type="text", text=criticality_text(found))],
            structured_content=found.model_dump(mode="json"),
        )

    @server.tool(
        description=FEEDBACK_DESCRIPTION,
        annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True),
    )
    def record_feedback(
        entry_id: Annotated[UUID, Field(description="the hit's entry_id")],
        verdict: Annotated[Verdict, Field(description="what the entry turned out to be worth")],
        incident_id: Annotated[IncidentId, Field(description="the incident investigated")],
        note: Annotated[FeedbackNote, Field(description="why, briefly")] = None,
        confidence: Annotated[
            ServedConfidence,
            Field(
                description="accepted for compatibility and ignored: the organization's "
                "recalibration reads the confidence its retrieval log says was served"
            ),
        ] = None,
    ) -> FeedbackCounts:
        caller = caller_identity()

        def work(tenant: str | None) -> FeedbackCounts:
            try:
                feedback = Feedback.model_validate(
                    {
                        "verdict": verdict,
                        "incident_id": incident_id,
                        "note": note,
                        "confidence": confidence,
                    }
                )
            except ValidationError as exc:  # a control character in the note, say
                raise invalid_input_from(exc) from None
            return backend.feedback(tenant, caller, entry_id, feedback)

        return call("record_feedback", work, _one)

    @server.custom_route("/metrics", methods=["GET"])
    async def tool_metrics(request: Request) -> JSONResponse:
        """Counts and latencies per tool of the tenant whose query token asks."""
        tenant = _authenticated_tenant()
        if verifier is not None and tenant is None:
            return JSONResponse({"error": "a valid query token is required"}, status_code=401)
        return JSONResponse(counters.snapshot(tenant if verifier is not None else tenant_of()))

    return server


def _one(_: object) -> int:
    return 1


def _tool_error(exc: Exception) -> tuple[str, ToolError]:
    """An outcome name for the metrics and an error the model can read and act on."""
    if isinstance(exc, InvalidInputError):
        return "invalid_input", ToolError(f"invalid {exc.field}: {exc.message}")
    if isinstance(exc, EntryNotFoundError):
        return "not_found", ToolError(str(exc))
    if isinstance(exc, RateLimitedError):
        return "rate_limited", ToolError(f"{exc}: retry after {exc.retry_after_s} s")
    if isinstance(exc, StoreUnavailableError | ContainersBusyError):
        logger.warning("store unavailable: %s", exc)  # the driver's words stay in the log
        return "unavailable", ToolError("Grandbo's store is unavailable; retry in a few seconds")
    if isinstance(exc, GrandboHTTPError):
        message = str(exc.body.get("message", ""))[:500]
        field = exc.body.get("field")
        if exc.status in (401, 403):
            return "unauthorized", ToolError(
                f"the Grandbo API refused this server's token (HTTP {exc.status}): "
                "mint a new query token and restart the server"
            )
        if exc.status >= 500:
            return "unavailable", ToolError(
                f"the Grandbo API failed (HTTP {exc.status}): {message}; retry shortly"
            )
        if exc.status == 429:
            return "rate_limited", ToolError(f"{message} (HTTP 429): retry later")
        prefix = f"invalid {field}: " if isinstance(field, str) else ""
        outcome = "not_found" if exc.status == 404 else "invalid_input"
        return outcome, ToolError(f"{prefix}{message} (HTTP {exc.status})")
    if isinstance(exc, ValidationError | ValueError | http.client.HTTPException):
        # not the API's document: not JSON, too large, truncated, or another shape
        logger.warning("the remote API answered an unexpected document: %s", exc)
        return "unavailable", ToolError(
            "the Grandbo API answered a document this server cannot read"
        )
    if isinstance(exc, OSError):  # urllib's URLError, refused, reset, timed out
        return "unavailable", ToolError(f"the Grandbo API is unreachable: {exc}; retry shortly")
    if isinstance(exc, GrandboError):
        return "error", ToolError(str(exc))
    logger.exception("tool failed")
    return "error", ToolError("Grandbo failed to answer (logged on the server)")
