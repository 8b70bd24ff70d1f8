"""What an imported event may claim: each is a write, held to the rules of the write it
stands for before anything of its batch is stored.

An event in a lake stream is a claim that a write happened: that someone (its actor) did
something (its type and payload) at a moment (its `recorded_at`), under a key that makes
the write's redelivery a no-op. The stream's manifest and chain only prove that the
stream was not altered since it was made, not that it was made by a Grandbo: so every
event is checked here as the write path would have checked the command.

- **The payload** is validated by the write's own models: an `entry_created` by
  `NewEntry` (the entry contract, the thin-entry refusal, safe text), an
  `entry_corrected` by `EntryText`, a verdict by `Feedback`, a reason by the retirement's
  rule; the fields a replay reads have their types and bounds (a lifetime in days, the
  incident's services and moment). Nothing else may be in it.
- **The tags are the text's**: the write path derives them from the title, summary and
  service (`grandbo.text.tags`) and adds the tags it was given; an imported entry's tags
  must hold every tag of its text, and be tags (what the tokenizer makes), nothing else.
- **The actor** is one a write could record; `incident-closed:ID` (what the incident
  pipeline writes) only on an `entry_created` of that incident's finding, with the key
  the pipeline mints for it (`incident:ID:finding:F`), or on a verdict of incident ID
  on an entry it recalled, with its key (`incident:ID:recalled:ENTRY`), and those keys
  only there: an import cannot claim an incident's delivery with an event the incident
  could not have made, so it cannot swallow the real delivery with a forged one.
- **A verdict is history**: admitted, counted and shown, it is marked imported by the
  repository and never fit (`grandbo.memory.domain.recalibration`), whatever
  confidence or actor it carries. So is a verdict's removal (an admin's, with its
  reason): the repository checks that it removes, once, a verdict of its entry that the
  stream or the organization holds.
- **The moment** is plausible (`grandbo.moments`): not before 2000, not more than the
  clock skew ahead of now; so is the incident moment an incident's entry records.
- **A removed payload** (`{"redacted": true, "sha256": ...}`) stays one: exactly those
  two fields; a tombstone's own event holds what a redaction writes and no text.

What is checked against the organization (a key held, a tombstone final, the log
replayable) is the repository's, under the write lock: `grandbo.memory.repository.lake`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
)

from grandbo.errors import InvalidInputError
from grandbo.memory.domain.idempotency import KeySpace, incident_finding_key, incident_recalled_key
from grandbo.memory.domain.lake_stream import LakeEvent
from grandbo.memory.domain.models import (
    MAX_EPISODIC_TTL_DAYS,
    MAX_EXPLICIT_TAGS,
    MAX_IDEMPOTENCY_KEY_CHARS,
    MAX_REASON_CHARS,
    EntryText,
    EventType,
    Feedback,
    Kind,
    NewEntry,
    Origin,
    ServiceName,
    Verdict,
    WriteContext,
)
from grandbo.memory.domain.projection import removed_payload
from grandbo.moments import EARLIEST_MOMENT, in_utc, plausible_moment
from grandbo.text.rules import find_unsafe_json, reject_unsafe_text
from grandbo.text.tags import MAX_TAGS_PER_TEXT, is_tag, tags_for

INCIDENT_ACTOR_PREFIX = "incident-closed:"
# as deep as a request body may nest (grandbo.api.request_body)
MAX_PAYLOAD_DEPTH = 32
_INCIDENT_KEY_PREFIX = f"{KeySpace.INCIDENT.value}:"
# what a redaction leaves of an incident's actor and of every key (migration 0030)
REDACTED_INCIDENT_ACTOR = "incident-closed:[redacted]"
_REDACTED_KEY_PREFIX = "redacted:"

_Sha256 = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]
_Uuid = Annotated[StrictStr, Field(pattern=r"^[0-9a-fA-F-]{32,36}$")]
_Reason = Annotated[StrictStr, StringConstraints(min_length=1, max_length=MAX_REASON_CHARS)]
_Count = Annotated[StrictInt, Field(ge=0, le=2**31 - 1)]


class _Payload(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class _Removed(_Payload):
    """A payload a redaction replaced (migration 0019)."""

    redacted: StrictBool
    sha256: _Sha256


class _Created(_Payload):
    title: StrictStr
    summary: StrictStr
    tags: list[StrictStr] = Field(max_length=MAX_TAGS_PER_TEXT)
    # the tags as written (migration 0041); absent from an earlier version's events
    given_tags: list[StrictStr] | None = Field(default=None, max_length=MAX_EXPLICIT_TAGS)
    service: StrictStr | None = None
    origin: StrictStr
    incident_id: StrictStr | None = None
    kind: StrictStr = Kind.DURABLE.value
    ttl_days: Annotated[StrictInt, Field(ge=1, le=MAX_EPISODIC_TTL_DAYS)] | None = None
    incident_services: list[ServiceName] | None = Field(default=None, max_length=200)
    incident_at: StrictStr | None = None


class _Corrected(_Payload):
    title: StrictStr
    summary: StrictStr
    tags: list[StrictStr] = Field(max_length=MAX_TAGS_PER_TEXT)
    # the tags as written (migration 0041); absent from an earlier version's events
    given_tags: list[StrictStr] | None = Field(default=None, max_length=MAX_EXPLICIT_TAGS)
    service: StrictStr | None = None


class _Retired(_Payload):
    reason: _Reason
    superseded_by: _Uuid | None = None


class _Feedback(_Payload):
    verdict: StrictStr
    incident_id: StrictStr
    note: StrictStr | None = None
    confidence: StrictFloat | None = None


class _FeedbackRemoved(_Payload):
    """What `grandbo.memory.repository.feedback` writes when an admin removes a verdict."""

    verdict_key: Annotated[
        StrictStr, StringConstraints(min_length=1, max_length=MAX_IDEMPOTENCY_KEY_CHARS)
    ]
    verdict: StrictStr
    reason: _Reason


class _Merged(_Payload):
    merged_into: _Uuid
    moved_from: _Uuid | None = None
    by: StrictStr | None = None
    distance: StrictFloat | StrictInt | None = None
    tag_overlap: StrictFloat | StrictInt | None = None
    embed_rev: Annotated[StrictStr, StringConstraints(max_length=200)] | None = None


class _Split(_Payload):
    split_from: _Uuid | None = None
    resurfaced: StrictBool | None = None
    never_merge: StrictBool | None = None


class _MergePolicy(_Payload):
    never_merge: StrictBool


class _Promoted(_Payload):
    pass


class _Tombstone(_Payload):
    """What `grandbo.memory.repository.redaction` writes on a redaction: no text."""

    reason: _Reason
    redacted_with: _Uuid | None = None
    event: StrictStr | None = None
    origin: StrictStr
    kind: StrictStr
    expires_at: StrictStr | None = None
    service: ServiceName | None = None
    incident_id: None = None
    superseded_by: _Uuid | None = None
    helpful_count: _Count = 0
    not_helpful_count: _Count = 0
    misleading_count: _Count = 0
    # digests of the texts the redaction removed (grandbo.memory.domain.redacted_text)
    text_sha256: list[_Sha256] = Field(default_factory=list, max_length=10_000)


_PAYLOADS: dict[EventType, type[_Payload]] = {
    EventType.CREATED: _Created,
    EventType.CORRECTED: _Corrected,
    EventType.RETIRED: _Retired,
    EventType.SUPERSEDED: _Retired,
    EventType.FEEDBACK: _Feedback,
    EventType.FEEDBACK_REMOVED: _FeedbackRemoved,
    EventType.MERGED: _Merged,
    EventType.SPLIT: _Split,
    EventType.MERGE_POLICY: _MergePolicy,
    EventType.PROMOTED: _Promoted,
    EventType.REDACTED: _Tombstone,
}


class _RefusedError(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _validated(model: type[BaseModel], value: dict[str, Any], prefix: str = "") -> Any:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        error = exc.errors()[0]
        path = ".".join(str(part) for part in error["loc"])
        raise _RefusedError(
            f"{prefix}{path}" if path else prefix.rstrip("."), error["msg"]
        ) from exc


def _text_tags(
    title: str, summary: str, service: str | None, tags: list[str], given: list[str] | None
) -> None:
    """The tags hold every tag of the text and of the tags as written (unless they alone
    passed the cap) and each is a tag the tokenizer makes; where the event holds its tags
    as written (`given`, migration 0041), nothing else."""
    for index, tag in enumerate(tags):
        if not is_tag(tag):
            raise _RefusedError(f"payload.tags.{index}", f"{tag!r} is not a tag (tokenized text)")
    if len(set(tags)) != len(tags):
        raise _RefusedError("payload.tags", "holds a tag twice")
    derived = tags_for([title, summary, service or ""], given or ())
    if len(tags) < MAX_TAGS_PER_TEXT and (missing := [t for t in derived if t not in tags]):
        raise _RefusedError(
            "payload.tags",
            f"lacks the tags its text gives ({', '.join(missing[:5])}): an entry's tags are "
            "derived from its title, summary and service, not taken from the stream",
        )
    if given is not None and set(tags) != set(derived):
        # an index tag neither the text nor the tags as written give would find the entry
        # by a word it never shows
        raise _RefusedError(
            "payload.tags",
            "holds tags neither its text nor its given_tags give: an entry's tags are "
            "derived, not taken from the stream",
        )


def _same(stored: str | None, validated: str | None, field: str) -> None:
    if stored != validated:
        raise _RefusedError(f"payload.{field}", "is not as the write path stores it (trimmed)")


def _created(payload: _Created, event: LakeEvent, now: datetime) -> None:
    entry = _text_as_stored(
        NewEntry,
        payload,
        {"origin": payload.origin, "incident_id": payload.incident_id, "kind": payload.kind},
    )
    if (payload.ttl_days is not None) != (entry.kind is Kind.EPISODIC):
        raise _RefusedError(
            "payload.ttl_days", "an episodic entry, and only one, records its lifetime"
        )
    if entry.incident_id is None and (payload.incident_services or payload.incident_at):
        raise _RefusedError("payload.incident_at", "only an incident's entry records its incident")
    if payload.incident_at is not None:
        try:
            plausible_moment(datetime.fromisoformat(payload.incident_at), now)
        except ValueError as exc:
            raise _RefusedError("payload.incident_at", str(exc)) from exc
    if entry.origin is Origin.INCIDENT and entry.incident_id is None:
        raise _RefusedError("payload.incident_id", "an incident's entry names its incident")
    _incident_claim(event, entry.incident_id if entry.origin is Origin.INCIDENT else None)


def _incident_claim(event: LakeEvent, incident_id: str | None) -> None:
    """`incident-closed:ID` and `incident:ID:finding:F` go together, on the entry_created
    of incident ID's finding (`grandbo.memory.incidents`), and nowhere else; the forms a
    redaction leaves (`incident-closed:[redacted]`, `redacted:ENTRY:EVENT`, migration
    0030) only on an event whose payload a redaction removed."""
    removed = removed_payload(event.event_type, event.payload)
    if event.actor == REDACTED_INCIDENT_ACTOR or event.idempotency_key.startswith(
        _REDACTED_KEY_PREFIX
    ):
        if not removed:
            raise _RefusedError(
                "idempotency_key" if event.actor != REDACTED_INCIDENT_ACTOR else "actor",
                "is what a redaction leaves on the events of a redacted entry: only an "
                "event whose payload was removed carries it",
            )
        if event.actor.startswith(INCIDENT_ACTOR_PREFIX) and (
            event.actor != REDACTED_INCIDENT_ACTOR
        ):
            raise _RefusedError("actor", "a redacted event names no incident")
        if event.idempotency_key.startswith(_REDACTED_KEY_PREFIX) and not re.fullmatch(
            rf"{_REDACTED_KEY_PREFIX}{event.entry_id}:[0-9]{{1,19}}:[0-9a-f]{{32}}",
            event.idempotency_key,
        ):
            raise _RefusedError(
                "idempotency_key",
                f"a redacted event's key is {_REDACTED_KEY_PREFIX}ENTRY:EVENT:NONCE, of its "
                "own entry (migration 0030)",
            )
        return
    actor_claims = event.actor.startswith(INCIDENT_ACTOR_PREFIX)
    key_claims = event.idempotency_key.startswith(_INCIDENT_KEY_PREFIX)
    if not actor_claims and not key_claims:
        return
    claimed = event.actor[len(INCIDENT_ACTOR_PREFIX) :] if actor_claims else None
    if incident_id is None:
        if event.event_type is EventType.CREATED and removed:
            incident_id = claimed  # a removed finding: its payload names no incident
        else:
            raise _RefusedError(
                "actor" if actor_claims else "idempotency_key",
                "only an incident's finding, as the incident pipeline writes it, is an "
                "incident's: this event claims an incident delivery it could not be",
            )
    if claimed != incident_id:
        raise _RefusedError(
            "actor", f"an incident's finding is written by {INCIDENT_ACTOR_PREFIX}ID"
        )
    prefix = incident_finding_key(incident_id or "", "")
    if not event.idempotency_key.startswith(prefix) or event.idempotency_key == prefix:
        raise _RefusedError(
            "idempotency_key",
            "an incident's finding is keyed by its incident and finding "
            "(incident:ID:finding:F), as the incident pipeline keys it",
        )


def _verdict_claim(event: LakeEvent, verdict: Feedback) -> None:
    """A verdict by `incident-closed:ID` is incident ID's outcome on an entry its
    investigation recalled (`grandbo.memory.incidents`): its payload names incident ID
    and it is keyed `incident:ID:recalled:ENTRY` for its own entry, as the pipeline keys
    it. Any other claim of an incident is refused as `_incident_claim` refuses it."""
    own_actor = f"{INCIDENT_ACTOR_PREFIX}{verdict.incident_id}"
    own_key = incident_recalled_key(verdict.incident_id, str(event.entry_id))
    if event.actor == own_actor and event.idempotency_key == own_key:
        return
    if event.actor == own_actor:
        raise _RefusedError(
            "idempotency_key",
            "an incident's outcome on an entry it recalled is keyed by its incident and "
            "entry (incident:ID:recalled:ENTRY), as the incident pipeline keys it",
        )
    _incident_claim(event, None)


def _text_as_stored(
    model: type[EntryText],
    payload: _Created | _Corrected,
    extra: dict[str, Any] | None = None,
) -> Any:
    """The payload's text validated by the write's own model (`NewEntry`, `EntryText`),
    stored as the write path stores it (nothing to trim), its tags the text's."""
    given = {} if payload.given_tags is None else {"tags": payload.given_tags}
    try:
        text = _validated(
            model,
            {"title": payload.title, "summary": payload.summary, "service": payload.service}
            | given
            | (extra or {}),
            "payload.",
        )
    except _RefusedError as refused:
        if refused.field == "payload.tags" or refused.field.startswith("payload.tags."):
            # the model's `tags` are the payload's `given_tags`
            raise _RefusedError(
                refused.field.replace("payload.tags", "payload.given_tags", 1), refused.message
            ) from refused
        raise
    _same(payload.title, text.title, "title")
    _same(payload.summary, text.summary, "summary")
    _same(payload.service, text.service, "service")
    if payload.given_tags is not None and payload.given_tags != text.tags:
        raise _RefusedError("payload.given_tags", "is not as the write path stores it (trimmed)")
    _text_tags(
        text.title,
        text.summary,
        text.service,
        payload.tags,
        None if payload.given_tags is None else text.tags,
    )
    return text


def _checked(event: LakeEvent, now: datetime) -> None:
    _validated(WriteContext, {"actor": event.actor, "idempotency_key": event.idempotency_key})
    unsafe = find_unsafe_json(event.payload, max_depth=MAX_PAYLOAD_DEPTH)
    if unsafe is not None:  # a NUL in a merge's `by`, a lone surrogate anywhere
        path, problem = unsafe
        raise _RefusedError(f"payload{'.' + path if path else ''}", problem)
    try:
        plausible_moment(event.recorded_at, now)
    except ValueError as exc:
        raise _RefusedError("recorded_at", str(exc)) from exc
    if removed_payload(event.event_type, event.payload):
        _validated(_Removed, event.payload, "payload.")
        _incident_claim(event, None)
        return
    payload = _validated(_PAYLOADS[event.event_type], event.payload, "payload.")
    if isinstance(payload, _Created):
        _created(payload, event, now)
        return
    if isinstance(payload, _Feedback):
        _verdict_claim(event, _validated(Feedback, event.payload, "payload."))
        return
    _incident_claim(event, None)
    if isinstance(payload, _Corrected):
        _text_as_stored(EntryText, payload)
    elif isinstance(payload, _Retired | _Tombstone):
        _reason(payload.reason)
        if isinstance(payload, _Tombstone):
            _tombstone(payload, now)
    elif isinstance(payload, _FeedbackRemoved):
        _reason(payload.reason)
        if payload.verdict not in {verdict.value for verdict in Verdict}:
            raise _RefusedError("payload.verdict", "is not a verdict")
    elif isinstance(payload, _Merged) and payload.merged_into.lower() == str(event.entry_id):
        raise _RefusedError("payload.merged_into", "an entry is never a recurrence of itself")


def _reason(reason: str) -> None:
    """A retirement's or a redaction's reason, as the service takes it: stripped, safe."""
    try:
        reject_unsafe_text(reason)
    except ValueError as exc:
        raise _RefusedError("payload.reason", str(exc)) from exc
    if reason.strip() != reason:
        raise _RefusedError("payload.reason", "is not as the write path stores it (trimmed)")


def _tombstone(payload: _Tombstone, now: datetime) -> None:
    try:
        Origin(payload.origin)
    except ValueError as exc:
        raise _RefusedError("payload.origin", "is not an origin an entry has") from exc
    try:
        Kind(payload.kind)
    except ValueError as exc:
        raise _RefusedError("payload.kind", "is not a kind of entry") from exc
    if (payload.kind == Kind.EPISODIC.value) != (payload.expires_at is not None):
        raise _RefusedError(
            "payload.expires_at", "an episodic entry's tombstone, and only one, has an expiry"
        )
    if payload.expires_at is not None:
        try:
            moment = datetime.fromisoformat(payload.expires_at)
        except ValueError as exc:
            raise _RefusedError("payload.expires_at", "is not a time") from exc
        if moment.tzinfo is None:
            raise _RefusedError("payload.expires_at", "must carry a time zone")
        try:
            utc = in_utc(moment)
        except ValueError as exc:
            raise _RefusedError("payload.expires_at", str(exc)) from exc
        # an expiry is a moment plus a lifetime of at most MAX_EPISODIC_TTL_DAYS
        if not EARLIEST_MOMENT <= utc <= now + timedelta(days=MAX_EPISODIC_TTL_DAYS + 1):
            raise _RefusedError("payload.expires_at", "is not an expiry an entry can have")


def admit(events: Sequence[LakeEvent], offset: int, now: datetime) -> None:
    """Every event of a batch (at `offset` in its stream) as its write would be checked;
    InvalidInputError naming `events.N.FIELD` and the rule at the first that is not."""
    for index, event in enumerate(events):
        try:
            _checked(event, now)
        except _RefusedError as exc:
            raise InvalidInputError(
                f"events.{offset + index}.{exc.field}",
                f"{exc.message} (an {event.event_type.value} of entry {event.entry_id}; "
                "nothing of the batch was stored)",
            ) from exc
