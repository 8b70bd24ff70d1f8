"""The lake stream: an organization's event log as JSON lines, and the manifest that
proves a copy of it whole.

One event a line (`LakeEvent`, its canonical JSON: sorted keys, no spaces, UTF-8), in
event-id order, then one `{"manifest": ...}` line. The manifest counts the events (in
all and per type), names the first and last event times, the SHA-256 of the event lines
(each with its newline: `head -n -1 FILE | sha256sum`) and a hash chain over them. The
chain lets a receiver that gets the stream in batches check each batch, first to last,
before it stores any: link i = SHA-256(i as 8 bytes || SHA-256(line i) || link i+1), and
the link after the last line is the SHA-256 of the manifest's other fields, so an edited,
dropped, added or reordered line, a batch sent at another offset, or an edited manifest,
breaks a link before anything of it is stored.

Vectors are never in the stream: they are derived data, made again by the target's model.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
)

from grandbo.errors import InvalidInputError, invalid_input_from
from grandbo.memory.domain.models import MAX_ACTOR_CHARS, MAX_IDEMPOTENCY_KEY_CHARS, EventType
from grandbo.moments import in_utc

LAKE_FORMAT: Literal["grandbo-lake/1"] = "grandbo-lake/1"
# events in one import batch (the API's body limit packs fewer of the larger ones)
MAX_IMPORT_BATCH = 1_000
Sha256Hex = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]


class LakeEvent(BaseModel):
    """One stored event, everything its replay needs (its event id is the target's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    entry_id: UUID
    event_type: EventType
    revision: Annotated[StrictInt, Field(ge=1, le=2**31 - 1)]  # the column is an integer
    payload: dict[str, Any]
    actor: Annotated[StrictStr, Field(min_length=1, max_length=MAX_ACTOR_CHARS)]
    idempotency_key: Annotated[StrictStr, Field(min_length=1, max_length=MAX_IDEMPOTENCY_KEY_CHARS)]
    recorded_at: AwareDatetime

    @field_validator("recorded_at")
    @classmethod
    def _in_utc(cls, value: datetime) -> datetime:
        # ValueError (a named 422), not OverflowError (a 500), for a moment UTC cannot hold
        return in_utc(value)

    def line(self) -> str:
        """The event's line in the stream (without its newline)."""
        return canonical_json(self.model_dump(mode="json"))


class LakeManifest(BaseModel):
    """What a whole stream holds, and the digests that prove a copy of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["grandbo-lake/1"] = LAKE_FORMAT
    tenant_id: Annotated[StrictStr, Field(min_length=1, max_length=200)]
    count: Annotated[StrictInt, Field(ge=0)]
    event_types: dict[str, Annotated[StrictInt, Field(ge=1)]]
    first_recorded_at: AwareDatetime | None
    last_recorded_at: AwareDatetime | None
    sha256: Sha256Hex = Field(description="SHA-256 of the event lines, each with its newline")
    chain_sha256: Sha256Hex = Field(
        description="the first link of the hash chain over the lines (checked batch by batch)"
    )

    def end_link(self) -> str:
        """The link after the last line: the manifest's other fields, hashed."""
        fields = self.model_dump(mode="json", exclude={"chain_sha256"})
        return hashlib.sha256(canonical_json(fields).encode()).hexdigest()

    def line(self) -> str:
        return canonical_json({"manifest": self.model_dump(mode="json")})


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _link(position: int, line_digest: bytes, after: str) -> str:
    """The chain's link for the line at `position`, followed by the link `after` it."""
    return hashlib.sha256(
        position.to_bytes(8, "big") + line_digest + bytes.fromhex(after)
    ).hexdigest()


def chain_head(offset: int, lines: Sequence[str], after: str) -> str:
    """The link of the first of `lines` (at `offset` in the stream), given the link
    after the last."""
    current = after
    for position in range(offset + len(lines) - 1, offset - 1, -1):
        digest = hashlib.sha256(lines[position - offset].encode()).digest()
        current = _link(position, digest, current)
    return current


@dataclass
class StreamDigest:
    """The manifest of event lines as they go by, one pass."""

    tenant_id: str
    _sha256: Any = field(default_factory=hashlib.sha256)
    _line_digests: list[bytes] = field(default_factory=list)
    _types: Counter[str] = field(default_factory=Counter)
    _first: datetime | None = None
    _last: datetime | None = None

    def add(self, event: LakeEvent, line: str | None = None) -> str:
        text = event.line() if line is None else line
        self._sha256.update(text.encode() + b"\n")
        self._line_digests.append(hashlib.sha256(text.encode()).digest())
        self._types[event.event_type.value] += 1
        self._first = self._first or event.recorded_at
        self._last = event.recorded_at
        return text

    def manifest(self) -> LakeManifest:
        partial = LakeManifest(
            tenant_id=self.tenant_id,
            count=len(self._line_digests),
            event_types=dict(sorted(self._types.items())),
            first_recorded_at=self._first,
            last_recorded_at=self._last,
            sha256=self._sha256.hexdigest(),
            chain_sha256="0" * 64,
        )
        links = chain_links(self._line_digests, partial.end_link())
        return partial.model_copy(update={"chain_sha256": links[0]})


def chain_links(line_digests: Sequence[bytes], end: str) -> list[str]:
    """Every link of the chain: links[i] starts at line i, links[len] is `end`."""
    links = [end]
    for position in range(len(line_digests) - 1, -1, -1):
        links.append(_link(position, line_digests[position], links[-1]))
    links.reverse()
    return links


@dataclass(frozen=True)
class LakeStream:
    """A stream read back and proven whole: its events, their lines, its manifest."""

    events: list[LakeEvent]
    lines: list[str]
    manifest: LakeManifest
    links: list[str]

    @property
    def tenant_id(self) -> str:
        return self.manifest.tenant_id


def read_stream(lines: Iterable[str], *, source: str = "stream") -> LakeStream:
    """Parse a stream's lines and check them against its manifest; InvalidInputError
    (field `source`) naming the line or the check that failed, before anything is stored."""
    texts = [line.rstrip("\n") for line in lines]
    while texts and not texts[-1].strip():
        texts.pop()
    if not texts:
        raise InvalidInputError(source, "is empty: no events and no manifest")
    manifest = _manifest(texts[-1], len(texts), source)
    events: list[LakeEvent] = []
    digest = StreamDigest(manifest.tenant_id)
    for number, text in enumerate(texts[:-1], start=1):
        try:
            event = LakeEvent.model_validate_json(text)
        except ValidationError as exc:
            problem = invalid_input_from(exc)
            raise InvalidInputError(
                source, f"line {number}: {problem.field}: {problem.message}"
            ) from exc
        events.append(event)
        digest.add(event, text)
    verify_manifest(digest.manifest(), manifest, source)
    line_digests = [hashlib.sha256(text.encode()).digest() for text in texts[:-1]]
    return LakeStream(
        events=events,
        lines=texts[:-1],
        manifest=manifest,
        links=chain_links(line_digests, manifest.end_link()),
    )


def _manifest(text: str, lines: int, source: str) -> LakeManifest:
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    if not isinstance(document, dict) or set(document) != {"manifest"}:
        raise InvalidInputError(
            source, f"line {lines} is not the manifest: the stream is cut short or not a lake"
        )
    try:
        return LakeManifest.model_validate(document["manifest"])
    except ValidationError as exc:
        problem = invalid_input_from(exc)
        raise InvalidInputError(
            source, f"line {lines}: manifest.{problem.field}: {problem.message}"
        ) from exc


def verify_manifest(found: LakeManifest, manifest: LakeManifest, source: str) -> None:
    """The events' own manifest against the one the stream carries, field by field."""
    if found.count != manifest.count:
        raise InvalidInputError(
            source, f"holds {found.count} events, its manifest says {manifest.count}"
        )
    if found.event_types != manifest.event_types:
        raise InvalidInputError(
            source,
            f"holds events {found.event_types}, its manifest says {manifest.event_types}",
        )
    if found.sha256 != manifest.sha256:
        raise InvalidInputError(
            source,
            "the SHA-256 of its event lines differs from its manifest's: an event was "
            "edited, added, dropped or moved",
        )
    if (found.first_recorded_at, found.last_recorded_at) != (
        manifest.first_recorded_at,
        manifest.last_recorded_at,
    ):
        raise InvalidInputError(source, "its first or last event time differs from its manifest's")
    if found.chain_sha256 != manifest.chain_sha256:
        raise InvalidInputError(source, "its hash chain differs from its manifest's")
