"""Moving an organization's lake between stores: its event log exported page by page
with a manifest, and imported batch by batch into another store, idempotently, the
projection rebuilt from the imported events and the vectors left to the target's model.

The stream's format is `grandbo.memory.domain.lake_stream`; the SQL is the
repository's (`grandbo.memory.repository.lake`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from grandbo.errors import GrandboError, InvalidInputError
from grandbo.memory.domain.embed_queue import SQS_BATCH
from grandbo.memory.domain.lake_stream import (
    MAX_IMPORT_BATCH,
    LakeEvent,
    LakeManifest,
    LakeStream,
    StreamDigest,
    chain_head,
)
from grandbo.memory.lifecycle.admission import admit
from grandbo.memory.service import MemoryService
from grandbo.tenancy import require_tenant

_log = logging.getLogger(__name__)

DEFAULT_EXPORT_PAGE = 500
MAX_EXPORT_PAGE = 1_000
# a page's event lines stop past this many bytes (a response stays far below Lambda's 6 MB)
MAX_EXPORT_PAGE_BYTES = 1_000_000
# embed jobs the final batch of an import enqueues itself; the sweeper sends the rest
MAX_IMPORT_EMBED_JOBS = 1_000
_CURSOR = re.compile(r"^lake1\.([0-9]{1,19})\.([0-9]{1,19})$")


@dataclass(frozen=True)
class ExportPage:
    events: list[LakeEvent]
    next: str | None  # the cursor of the next page; None on the last, which has the manifest
    manifest: LakeManifest | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "events": [event.model_dump(mode="json") for event in self.events],
            "next": self.next,
            "manifest": None if self.manifest is None else self.manifest.model_dump(mode="json"),
        }


@dataclass(frozen=True)
class ImportOutcome:
    """What one batch did; on the last batch of the stream, what the import left."""

    tenant_id: str
    offset: int
    inserted: int
    present: int
    next_offset: int
    next_chain_sha256: str
    complete: bool
    projection_rebuilt: bool = False
    entries: int = 0
    embed_jobs_enqueued: int = 0
    entries_awaiting_vectors: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "tenant_id": self.tenant_id,
            "offset": self.offset,
            "inserted": self.inserted,
            "present": self.present,
            "next": None
            if self.complete
            else {"offset": self.next_offset, "chain_sha256": self.next_chain_sha256},
            "complete": self.complete,
            "projection_rebuilt": self.projection_rebuilt,
            "entries": self.entries,
            "embed_jobs_enqueued": self.embed_jobs_enqueued,
            "entries_awaiting_vectors": self.entries_awaiting_vectors,
        }


def _cursor(after: str | None) -> tuple[int, int] | None:
    if after is None:
        return None
    match = _CURSOR.fullmatch(after)
    if match is None:
        raise InvalidInputError("after", "must be null or the `next` cursor a page returned")
    upto, last = int(match.group(1)), int(match.group(2))
    if last > upto:
        raise InvalidInputError("after", "must be null or the `next` cursor a page returned")
    return upto, last


class LakeTransfer:
    """Export and import over one memory service (its repository and embed queue)."""

    def __init__(self, service: MemoryService) -> None:
        self.service = service
        self.repository = service.repository

    def export_page(
        self, tenant_id: str, after: str | None = None, limit: int = DEFAULT_EXPORT_PAGE
    ) -> ExportPage:
        """One page of the tenant's events in event-id order. The first (`after` None)
        fixes the export's last event; the last page carries the manifest of them all."""
        tenant = require_tenant(tenant_id)
        if isinstance(limit, bool) or not 1 <= limit <= MAX_EXPORT_PAGE:
            raise InvalidInputError("limit", f"must be between 1 and {MAX_EXPORT_PAGE}")
        cursor = _cursor(after)
        upto, last = cursor if cursor is not None else (self.repository.event_horizon(tenant), 0)
        rows = self.repository.event_page(tenant, last, upto, limit + 1)
        page: list[LakeEvent] = []
        size = 0
        for event_id, event in rows[:limit]:
            size += len(event.line().encode()) + 1
            if page and size > MAX_EXPORT_PAGE_BYTES:
                break
            page.append(event)
            last = event_id
        if len(page) < len(rows):
            return ExportPage(page, f"lake1.{upto}.{last}", None)
        return ExportPage(page, None, self._manifest(tenant, upto))

    def _manifest(self, tenant_id: str, upto: int) -> LakeManifest:
        digest = StreamDigest(tenant_id)
        self.repository.fold_events(tenant_id, upto, digest.add)
        return digest.manifest()

    def export(self, tenant_id: str, write_line: Callable[[str], None]) -> LakeManifest:
        """The whole stream through `write_line` (event lines, then the manifest line).
        GrandboError if the log changed under the export (a redaction rewrote a payload
        already written): the copy would not prove itself; export again."""
        digest = StreamDigest(require_tenant(tenant_id))
        after: str | None = None
        while True:
            page = self.export_page(tenant_id, after, MAX_EXPORT_PAGE)
            for event in page.events:
                write_line(digest.add(event))
            if page.manifest is not None:
                break
            after = page.next
        written = digest.manifest()
        if written != page.manifest:
            raise GrandboError(
                "the event log changed during the export (an entry redacted meanwhile): "
                "export again"
            )
        write_line(written.line())
        return written

    def import_batch(
        self,
        tenant_id: str,
        manifest: LakeManifest,
        offset: int,
        chain_sha256: str,
        rest_sha256: str,
        events: Sequence[LakeEvent],
        *,
        rename: bool = False,
        merge: bool = False,
    ) -> ImportOutcome:
        """Store one batch of a stream, checked against its manifest first: the batch's
        events with `rest_sha256` (the chain after them) must make `chain_sha256`, the
        manifest's own first link for the first batch. The last batch rebuilds the
        projection from the events and sends the entries' embed jobs."""
        tenant = require_tenant(tenant_id)
        if manifest.tenant_id != tenant and not rename:
            raise InvalidInputError(
                "rename",
                f"the stream is another organization's ({manifest.tenant_id}), not "
                f"{tenant}'s: import it with rename to make it {tenant}'s",
            )
        if not events or len(events) > MAX_IMPORT_BATCH:
            raise InvalidInputError("events", f"must hold 1 to {MAX_IMPORT_BATCH} events")
        end = offset + len(events)
        if offset < 0 or end > manifest.count:
            raise InvalidInputError(
                "offset", f"events {offset}-{end - 1} are not in a stream of {manifest.count}"
            )
        if offset == 0 and chain_sha256 != manifest.chain_sha256:
            raise InvalidInputError("chain_sha256", "the first batch starts the manifest's chain")
        if (end == manifest.count) != (rest_sha256 == manifest.end_link()):
            raise InvalidInputError("rest_sha256", "the chain ends with the stream's last event")
        if chain_head(offset, [e.line() for e in events], rest_sha256) != chain_sha256:
            raise InvalidInputError(
                "events",
                f"the events from offset {offset} do not match the manifest's chain: the "
                "stream was altered (an event edited, added, dropped or moved, or its "
                "manifest edited); nothing of this batch is stored",
            )
        # each event held to the rules of the write it stands for, before anything is
        # stored; its moment was a database's clock, so it is held to the wall clock
        admit(events, offset, datetime.now(UTC))
        batch = self.repository.import_events(
            tenant,
            events,
            offset=offset,
            first=offset == 0,
            merge=merge,
            last=end == manifest.count,
        )
        outcome = ImportOutcome(
            tenant_id=tenant,
            offset=offset,
            inserted=batch.inserted,
            present=batch.present,
            next_offset=end,
            next_chain_sha256=rest_sha256,
            complete=end == manifest.count,
        )
        if not outcome.complete:
            return outcome
        return self._finish(outcome)

    def _finish(self, outcome: ImportOutcome) -> ImportOutcome:
        """The projection made again from the events (unless it already equals their
        replay: a second import changes nothing), the learned graph completed from them,
        then embed jobs for what lacks a vector."""
        tenant = outcome.tenant_id
        report = self.repository.verify_projection(tenant)
        rebuilt = bool(report.mismatches)
        if rebuilt:
            self.repository.rebuild_projection(tenant)
            report = self.repository.verify_projection(tenant)
        if report.mismatches:
            raise GrandboError(f"the imported projection does not verify: {report.mismatches[0]}")
        # what the imported incidents taught, in the target's learned graph (idempotent)
        self.service.rebuild_learned_graph(tenant)
        enqueued = 0
        queue = self.service.embed_queue
        if queue is not None:
            pages = self.service.pending_job_pages(tenant, page_size=MAX_IMPORT_EMBED_JOBS)
            jobs = next(iter(pages), [])
            try:
                for start in range(0, len(jobs), SQS_BATCH):
                    queue.send(jobs[start : start + SQS_BATCH])
                    enqueued += len(jobs[start : start + SQS_BATCH])
            except Exception:  # the import stands: the sweeper enqueues what lacks a vector
                _log.exception("embed jobs of an import not all enqueued; the sweeper will")
        awaiting = len(self.service.pending_jobs(tenant))
        return replace(
            outcome,
            projection_rebuilt=rebuilt,
            entries=report.entries,
            embed_jobs_enqueued=enqueued,
            entries_awaiting_vectors=awaiting,
        )

    def import_stream(
        self,
        tenant_id: str,
        stream: LakeStream,
        *,
        rename: bool = False,
        merge: bool = False,
        batch_size: int = 500,
        progress: Callable[[Iterable[int], int], Iterable[int]] | None = None,
    ) -> ImportOutcome:
        """A whole stream (already proven whole by `read_stream`), batch by batch;
        `progress` wraps the batches' starts (with their count): the CLI shows a bar."""
        if not stream.events:
            raise InvalidInputError("file", "the stream holds no events: nothing to import")
        outcome: ImportOutcome | None = None
        inserted = present = 0
        starts: Iterable[int] = range(0, len(stream.events), batch_size)
        if progress is not None:
            starts = progress(starts, -(-len(stream.events) // batch_size))
        for start in starts:
            end = min(start + batch_size, len(stream.events))
            outcome = self.import_batch(
                tenant_id,
                stream.manifest,
                start,
                stream.links[start],
                stream.links[end],
                stream.events[start:end],
                rename=rename,
                merge=merge,
            )
            inserted += outcome.inserted
            present += outcome.present
        assert outcome is not None
        return replace(outcome, offset=0, inserted=inserted, present=present)
