"""Request bodies of the admin routes (the signed admin API, the console's), shared by the
handlers, the clients and the OpenAPI document (the query routes': `grandbo.api.models`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

from pydantic import (
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)

from grandbo.api.auth import Email, PersonRole
from grandbo.api.models import Body, Probability, QueryRequest
from grandbo.api.people import DEFAULT_LINK_DAYS, MAX_LINK_DAYS
from grandbo.memory.domain.lake_stream import (
    MAX_IMPORT_BATCH,
    LakeEvent,
    LakeManifest,
    Sha256Hex,
)
from grandbo.memory.lifecycle.lake import DEFAULT_EXPORT_PAGE, MAX_EXPORT_PAGE
from grandbo.topology.model import TopologyBatch


class CreateEntryRequest(Body):
    """A lesson written by hand: what was learned, in words an investigator can verify."""

    title: StrictStr = Field(
        description="the lesson in a line (3 to 200 characters)",
        examples=["Shard rebalancing saturated disks"],
    )
    summary: StrictStr = Field(
        description="what happened and why, as a colleague would need it (a thin summary "
        "is refused)",
        examples=[
            "Adding two nodes started shard relocation that saturated disk IO; queries timed out."
        ],
    )
    service: StrictStr | None = Field(
        default=None, description="the service it is about", examples=["search-api"]
    )
    tags: list[StrictStr] = Field(
        default_factory=list,
        max_length=50,
        description="words it should also be found by, kept as written (its own words are "
        "searched already)",
        examples=[["Elasticsearch", "shard-relocation"]],
    )
    incident_id: StrictStr | None = Field(
        default=None, description="the incident it was learned in", examples=["INC-4711"]
    )
    kind: Literal["durable", "episodic"] = Field(
        default="durable",
        description="episodic: a transient observation, served until the organization's "
        "episodic lifetime (30 days by default) runs out, then retired",
    )


class SettingsRequest(Body):
    """The organization's settings an admin may change (each one left out is kept)."""

    episodic_ttl_days: Annotated[StrictInt, Field(ge=1, le=3650)] | None = None
    retrieval_days: Annotated[StrictInt, Field(ge=1, le=3650)] | None = Field(
        default=None, description="how long the retrieval log keeps its questions (default 30)"
    )
    min_confidence: Probability | None = Field(
        default=None,
        description="the confidence floor of the organization's answers: hits under it "
        "are withheld (0 withholds nothing); see `reset_min_confidence`",
    )
    reset_min_confidence: StrictBool = Field(
        default=False, description="go back to the confidence model's default floor"
    )
    query_rate_per_minute: Annotated[StrictInt, Field(ge=1, le=100_000)] | None = Field(
        default=None,
        description="queries one caller (a key, a person) may ask per minute (default 600); "
        "past it a query answers 429 with Retry-After",
    )
    retrieval_rows_per_day: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = Field(
        default=None,
        description="the most questions the retrieval log keeps of one day (UTC, default "
        "20,000); the rest are counted as dropped",
    )
    reset_recalibration: StrictBool = Field(
        default=False,
        description="drop the recalibration the organization's verdicts made and start a "
        "new epoch: its confidence is the model's again, and every later refit ignores the "
        "verdicts recorded before now, until enough new ones refit it",
    )

    @model_validator(mode="after")
    def _something(self) -> SettingsRequest:
        if (
            self.episodic_ttl_days is None
            and self.retrieval_days is None
            and self.min_confidence is None
            and not self.reset_min_confidence
            and not self.reset_recalibration
            and self.query_rate_per_minute is None
            and self.retrieval_rows_per_day is None
        ):
            raise ValueError(
                "send episodic_ttl_days, retrieval_days, min_confidence, reset_min_confidence, "
                "reset_recalibration, query_rate_per_minute or retrieval_rows_per_day"
            )
        if self.min_confidence is not None and self.reset_min_confidence:
            raise ValueError("send min_confidence or reset_min_confidence, not both")
        return self


class CalibrationRequest(Body):
    """How many entries to measure the organization's vector cutoff on."""

    # bounded so the titles embed well inside the admin function's 15 s (Titan: one call
    # per title); `grandbo calibrate --sample` measures on more
    sample: Annotated[StrictInt, Field(ge=20, le=100)] = 60


class MergePolicyRequest(Body):
    """Whether an entry is kept apart from its look-alikes: never merged, never collapsed."""

    never_merge: StrictBool


class CorrectEntryRequest(Body):
    """A new revision of an entry's text: what it names changes, what it does not name
    stays as the current revision has it (then expected: a correction meanwhile is a
    409); `"service": null` clears the service; `tags` replaces the given tags."""

    title: StrictStr | None = None
    summary: StrictStr | None = None
    service: StrictStr | None = None
    tags: list[StrictStr] | None = Field(default=None, max_length=50)
    expected_revision: Annotated[StrictInt, Field(ge=1)] | None = None


class RetireEntryRequest(Body):
    reason: Annotated[StrictStr, Field(min_length=1, max_length=2000)]
    superseded_by: UUID | None = None


class RedactionRequest(Body):
    """Remove an entry's text for good: why, and whether its recurrences stay (they are
    redacted with it unless kept; kept, they resurface as an entry of their own)."""

    reason: Annotated[StrictStr, Field(min_length=1, max_length=2000)]
    keep_recurrences: StrictBool = False
    also_remove: Annotated[
        list[Annotated[StrictStr, Field(min_length=1, max_length=500)]], Field(max_length=20)
    ] = Field(
        default_factory=list,
        description="strings to remove besides the entry's text, wherever a logged question "
        "or a verdict's note spells them (a short code, a passphrase): each at least 4 "
        "letters or digits",
    )


class QuestionRemovalRequest(Body):
    """Remove one question from the retrieval log (a secret someone typed into a topic):
    why. What stays is who removed it, when, why and its topic's SHA-256."""

    reason: Annotated[StrictStr, Field(min_length=1, max_length=2000)]


class NoteRemovalRequest(Body):
    """Remove one verdict's note (a secret quoted in it): why. The verdict stands and is
    still counted; who removed the note, when, why and its SHA-256 stay."""

    reason: Annotated[StrictStr, Field(min_length=1, max_length=2000)]


class VerdictRemovalRequest(Body):
    """Remove one verdict (a flood's, or one a sender should not have been trusted with):
    why. It is counted no more and never fit again; who removed it, when and why stay,
    an event of its own."""

    reason: Annotated[StrictStr, Field(min_length=1, max_length=2000)]


LinkDays = Annotated[StrictInt, Field(ge=1, le=MAX_LINK_DAYS)]


class PersonRequest(Body):
    """A person added to the organization with their role, or the role of one already in
    it changed (their key renewed with it: what they signed in with ends). The answer
    carries their console sign-in token, good for `link_days`."""

    email: Email
    role: PersonRole
    link_days: LinkDays = DEFAULT_LINK_DAYS


class PersonLinkRequest(Body):
    """A new console sign-in token for a person, good for `link_days`."""

    email: Email
    link_days: LinkDays = DEFAULT_LINK_DAYS


class PersonNameRequest(Body):
    """The person a revocation (their key renewed: every link and session ends) or a
    removal (their next request is refused) is for."""

    email: Email


class PurgeRequest(Body):
    """The first step of an organization's purge: it names the organization, as a typed
    confirmation (the signature already binds it), and gets the rows it would delete and
    the token that confirms it."""

    organization: Annotated[StrictStr, Field(min_length=1, max_length=200)]


class PurgeConfirmation(Body):
    """The second step: the token the first returned, within its 10 minutes, signed by
    the same key."""

    confirmation: Annotated[StrictStr, Field(min_length=1, max_length=200)]


class TopologyRequest(TopologyBatch):
    """A topology batch; `sync: true` makes it the whole namespace (absent rows close)."""

    sync: StrictBool = False  # "yes" is not true: an empty batch with sync closes everything


class ExportRequest(Body):
    """One page of the organization's event log: `after` is the `next` cursor the previous
    page returned (null for the first page, which fixes the export's last event)."""

    after: Annotated[StrictStr, Field(max_length=64)] | None = None
    limit: Annotated[StrictInt, Field(ge=1, le=MAX_EXPORT_PAGE)] = DEFAULT_EXPORT_PAGE


class ImportRequest(Body):
    """One batch of a lake stream, in order: the events from `offset`, the chain link they
    start (`chain_sha256`: the manifest's own for the first batch, then the previous
    answer's `next`) and the link after them (`rest_sha256`)."""

    manifest: LakeManifest
    offset: Annotated[StrictInt, Field(ge=0)]
    chain_sha256: Sha256Hex
    rest_sha256: Sha256Hex
    events: list[LakeEvent] = Field(min_length=1, max_length=MAX_IMPORT_BATCH)
    rename: StrictBool = Field(
        default=False, description="a stream of another organization becomes this one's"
    )
    merge: StrictBool = Field(
        default=False, description="import into an organization that has memory of its own"
    )


class ExplanationRequest(QueryRequest):
    """ "Why not this one?": the query as Beacon would send it, and the entry expected."""

    entry_id: UUID


class CatalogRequest(Body):
    """A page of the organization's entries, newest first: every filter optional; `after`
    is the `next` cursor of the previous page."""

    status: Literal["active", "retired", "superseded", "merged", "redacted"] | None = None
    kind: Literal["durable", "episodic"] | None = None
    origin: Literal["incident", "admin", "correction"] | None = None
    service: Annotated[StrictStr, Field(max_length=120)] | None = None
    text: Annotated[StrictStr, Field(max_length=200)] | None = Field(
        default=None, description="a substring of the title or the summary, any case"
    )
    words: Annotated[StrictStr, Field(max_length=200)] | None = Field(
        default=None,
        description="keywords, as a person searches: every word (split on spaces, at most "
        "10) appears in the title, the summary or the service, any case",
    )
    after: Annotated[StrictStr, Field(max_length=200)] | None = None
    limit: Annotated[StrictInt, Field(ge=1, le=200)] = 50


class RetrievalsRequest(Body):
    """The organization's retrieval log, newest first: one incident's (`incident_id`), the
    questions memory could not answer (`unanswered`: no hit served, by the answer's own
    floor and regime), a page
    before `before` (the `next` of the previous page)."""

    incident_id: Annotated[StrictStr, Field(min_length=1, max_length=200)] | None = None
    unanswered: bool = False
    before: Annotated[StrictStr, Field(max_length=100)] | None = None
    limit: Annotated[StrictInt, Field(ge=1, le=200)] = 50


class RetrievalIncidentsRequest(Body):
    """The incidents whose agent asked memory, the latest asked first."""

    limit: Annotated[StrictInt, Field(ge=1, le=200)] = 50


class MergeRequest(Body):
    """Record this entry as a recurrence of `into` (an event; `split` reverses it)."""

    into: UUID


class DistinctRequest(Body):
    """A suggested pair is two lessons: it is not suggested again."""

    other: UUID


class RepairRequest(Body):
    """The health findings to repair (`GET /v1/admin/health` lists them)."""

    checks: list[
        Literal["projection_drift", "index_drift", "expired_active", "unembedded", "stale_vectors"]
    ] = Field(min_length=1, max_length=5)


class TopologyReadRequest(Body):
    """A node's blast radius or criticality, read by an admin (the console's topology)."""

    type: Annotated[StrictStr, Field(min_length=1, max_length=64)] = "Service"
    id: Annotated[StrictStr, Field(min_length=1, max_length=300)]
    hops: Annotated[StrictInt, Field(ge=1, le=3)] = 3
    as_of: datetime | None = Field(default=None, description="ISO 8601 with a time zone")
    namespaces: Literal["topology", "learned", "both"] = Field(
        default="topology",
        description="dependencies, the services that failed together in past incidents, or both",
    )


class TopologyNodesRequest(Body):
    """The organization's topology nodes (at `as_of`, or now), by type and id."""

    as_of: datetime | None = Field(default=None, description="ISO 8601 with a time zone")
    limit: Annotated[StrictInt, Field(ge=1, le=5000)] = 1000
