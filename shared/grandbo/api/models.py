"""Request bodies of the query routes (Beacon's question and verdict), shared by the
handlers, the client and the OpenAPI document. The admin routes' bodies are
`grandbo.api.admin_models`: the query function imports nothing it does not answer
(issue 51: its cold start)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
)

from grandbo.memory.domain.models import MAX_FEEDBACK_NOTE_CHARS
from grandbo.memory.domain.topic import MAX_TOPIC_CHARS
from grandbo.memory.read.recall import DEFAULT_LIMIT, MAX_LIMIT

MAX_BODY_BYTES = 64 * 1024
# a number from 0 to 1, never a string, a boolean, NaN or an infinity
Probability = Annotated[StrictFloat, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


class Body(BaseModel):
    """A request body: no field it does not name."""

    model_config = ConfigDict(extra="forbid")


class QueryRequest(Body):
    """`query_org_memory`: a sentence about what was found, not a slug or a title."""

    topic: Annotated[StrictStr, Field(max_length=MAX_TOPIC_CHARS * 2)] = Field(
        description="the question, as a sentence: what was found, the suspected mechanism, "
        "the component, the symptom (a bare slug or a two-word title is refused with 422)",
        examples=["payments cannot get a database connection and requests time out after a deploy"],
    )
    limit: Annotated[StrictInt, Field(ge=1, le=MAX_LIMIT)] = Field(
        default=DEFAULT_LIMIT, description=f"at most this many hits (1 to {MAX_LIMIT})"
    )
    service: StrictStr | None = Field(
        default=None,
        description="only lessons of this service (widened by `scope`)",
        examples=["payments-api"],
    )
    scope: Literal["service", "blast_radius", "dependencies", "correlated"] | None = Field(
        default=None,
        description="widen `service` through the topology: services that depend on it "
        "(blast_radius) or that it depends on (dependencies), up to 3 hops, or those that "
        "failed together with it in past incidents, most often first (correlated: the "
        "learned graph)",
    )
    as_of: AwareDatetime | None = Field(
        default=None,
        description="read the scope and each hit's `staleness` from the topology valid at "
        "this moment (an incident's start, to replay it against the system as it was)",
    )
    min_confidence: Probability | None = Field(
        default=None,
        description="withhold hits whose confidence is under this (0 withholds nothing); "
        "default: the organization's floor, else the confidence model's",
    )
    incident_id: Annotated[StrictStr, Field(min_length=1, max_length=200)] | None = Field(
        default=None,
        description="the caller's current incident: the retrieval log files the question "
        "and its answer under it (POST /v1/admin/retrievals)",
    )

    def arguments(self) -> dict[str, Any]:
        """What `query_org_memory` takes beside the tenant and the topic: one place, so the
        query route, the admin search and "why not this one?" ask the same question."""
        return {
            "limit": self.limit,
            "service": self.service,
            "scope": self.scope,
            "as_of": self.as_of,
            "min_confidence": self.min_confidence,
        }


class FeedbackRequest(Body):
    """After an investigation: did this entry help? (query token; an event, counted)"""

    verdict: Literal["helpful", "not_helpful", "misleading"]
    incident_id: Annotated[StrictStr, Field(min_length=1, max_length=200)] = Field(
        description="the incident investigated: the verdict is tied to the latest answer "
        "the retrieval log filed under this incident that served the entry (a query's "
        "`incident_id`), and recalibrates the organization's confidence with the "
        "confidence served there; a verdict no answer ties is counted, never fit",
    )
    note: Annotated[StrictStr, Field(max_length=MAX_FEEDBACK_NOTE_CHARS)] | None = None
    confidence: Probability | None = Field(
        default=None,
        description="ignored (accepted for compatibility): the confidence a verdict "
        "recalibrates with is the one the server served, from its retrieval log, never "
        "one a caller states",
    )
