"""Moving an organization's lake between stores (issue 25, items 5-7): the event log
exported with a manifest, imported into another database or organization, idempotent,
refused when altered or another organization's, redactions kept, the projection equal."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from grandbo.cli import main
from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.errors import EntryRedactedError, GrandboError, InvalidInputError
from grandbo.memory.domain.lake_stream import read_stream
from grandbo.memory.domain.models import REDACTED_TEXT, EntryStatus
from grandbo.memory.lifecycle.lake import LakeTransfer
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.migrations import available_migrations
from grandbo.storage.connections import DatabaseUrls, connect

from .helpers import context, database_at, entry

MARKER = "zq7lakesecretx4"
# the projection's columns that are derived from the text by a model: never exported
VECTOR_COLUMNS = {"embedding", "embed_rev", "embedded_revision", "embedded_at"}
TOPIC = "checkout requests time out waiting for a database connection from the pool"


def merging_service(conn: psycopg.Connection[Any]) -> MemoryService:
    """Merging on: the fake model embeds texts with the same words identically."""
    return MemoryService(MemoryRepository(conn), FakeEmbeddingProvider(duplicate_distance=0.3))


def build_lake(service: MemoryService, tenant: str) -> dict[str, Any]:
    """An organization whose log holds every kind of event: created, corrected, merged,
    feedback, retired, superseded, promoted, merge policy, and a redaction."""
    lesson = service.record_entry(
        tenant,
        entry(
            "Checkout pool exhausted by a connection leak",
            "The checkout service leaked database connections on a retry path until the "
            "pool was exhausted and requests timed out.",
            service="checkout-api",
            incident_id="INC-1",
        ),
        context(),
    ).entry
    service.correct_entry(
        tenant,
        lesson.entry_id,
        entry(
            "Checkout pool exhausted by a connection leak",
            "The checkout service leaked database connections on a retry path until the "
            "pool was exhausted; every request then timed out waiting for a connection.",
            service="checkout-api",
        ),
        context(),
    )
    secret = service.record_entry(
        tenant,
        entry(
            "Search cluster credentials pasted into an incident",
            f"The search cluster went read-only on a full disk; the on-call pasted the "
            f"admin password {MARKER} into the incident channel while rotating nodes.",
            service="search-api",
        ),
        context(),
    ).entry
    service.embed_pending(tenant)
    restated = service.record_entry(
        tenant,
        entry(
            "Search cluster credentials pasted into an incident",
            f"The search cluster went read-only on a full disk; the on-call pasted the "
            f"admin password {MARKER} into the incident channel while rotating nodes.",
            service="search-api",
            incident_id="INC-2",
        ),
        context(),
    ).entry
    service.embed_pending(tenant)
    assert service.repository.get_entry(tenant, restated.entry_id).status is EntryStatus.MERGED
    service.record_feedback(
        tenant,
        lesson.entry_id,
        {"verdict": "helpful", "incident_id": "INC-3", "note": "found the leak at once"},
        context(actor="investigator"),
    )
    old = service.record_entry(
        tenant,
        entry(
            "DNS resolver cache poisoned by a stale record",
            "A stale CNAME in the resolver cache sent payments traffic to a drained load "
            "balancer for forty minutes after the cutover.",
            service="payments-api",
        ),
        context(),
    ).entry
    newer = service.record_entry(
        tenant,
        entry(
            "Stale CNAME after the payments cutover",
            "After the payments cutover a stale CNAME kept sending traffic to the drained "
            "load balancer until the resolver cache TTL expired.",
            service="payments-api",
        ),
        context(),
    ).entry
    service.retire_entry(
        tenant, old.entry_id, "restated better", context(), superseded_by=newer.entry_id
    )
    transient = service.record_entry(
        tenant,
        entry(
            "Deploy 4812 rolled back after health checks failed",
            "Deploy 4812 of the cart service was rolled back when its health checks failed "
            "on two of the three availability zones.",
            kind="episodic",
        ),
        context(),
    ).entry
    service.promote_entry(tenant, transient.entry_id, context())
    service.set_never_merge(tenant, newer.entry_id, True, context())
    gone = service.record_entry(
        tenant,
        entry(
            "Feature flag service returned stale flags",
            "The feature flag cache served flags a day old because the invalidation topic "
            "subscription had expired silently.",
        ),
        context(),
    ).entry
    service.retire_entry(tenant, gone.entry_id, "the flag service was replaced", context())
    service.redact_entry(tenant, secret.entry_id, "a credential was pasted", context())
    return {"lesson": lesson.entry_id, "secret": secret.entry_id, "restated": restated.entry_id}


def exported(service: MemoryService, tenant: str) -> list[str]:
    lines: list[str] = []
    LakeTransfer(service).export(tenant, lines.append)
    return lines


def projection(conn: psycopg.Connection[Any], tenant: str) -> dict[Any, dict[str, Any]]:
    """The tenant's entries, every column but the tenant and the vectors, as the owner
    reads them (no row-level security in the way)."""
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        cur.execute("SELECT * FROM org_memory_entries WHERE tenant_id = %s", (tenant,))
        return {
            row["entry_id"]: {
                k: v for k, v in row.items() if k not in VECTOR_COLUMNS | {"tenant_id"}
            }
            for row in cur.fetchall()
        }


def event_count(conn: psycopg.Connection[Any], tenant: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM org_memory_events WHERE tenant_id = %s", (tenant,)
    ).fetchone()
    return 0 if row is None else int(row[0])


@pytest.fixture
def second_store(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any]
) -> Iterator[tuple[DatabaseUrls, MemoryService, psycopg.Connection[Any]]]:
    """Another database on the test server, migrated to the latest version."""
    latest = available_migrations()[-1].version
    with database_at(database, admin_conn, latest) as urls:
        app = connect(urls.app)
        owner = connect(urls.admin)
        yield urls, merging_service(app), owner
        app.close()
        owner.close()


def test_a_lake_moves_to_another_database_whole_and_a_second_import_changes_nothing(
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    second_store: tuple[DatabaseUrls, MemoryService, psycopg.Connection[Any]],
) -> None:
    # Given an organization whose log holds every kind of event, a redaction included
    source = merging_service(app_conn)
    ids = build_lake(source, tenant)
    lines = exported(source, tenant)
    stream = read_stream(lines)
    assert stream.manifest.count == event_count(admin_conn, tenant) == len(lines) - 1
    assert stream.manifest.event_types["entry_redacted"] == 2  # the entry and its recurrence
    assert set(stream.manifest.event_types) >= {
        "entry_created",
        "entry_corrected",
        "entry_merged",
        "feedback_recorded",
        "entry_superseded",
        "entry_retired",
        "entry_promoted",
        "merge_policy_set",
    }
    assert MARKER not in "\n".join(lines)  # a redacted text is not in the stream either
    assert "embedding" not in "\n".join(lines)
    _, target, owner = second_store

    # When it is imported into another store
    outcome = LakeTransfer(target).import_stream(tenant, stream)

    # Then the target's projection equals the source's, entry by entry, both verified
    assert outcome.complete
    assert outcome.projection_rebuilt
    assert outcome.inserted == stream.manifest.count
    assert outcome.present == 0
    assert target.repository.verify_projection(tenant).mismatches == []
    assert source.repository.verify_projection(tenant).mismatches == []
    assert projection(owner, tenant) == projection(admin_conn, tenant)
    assert exported(target, tenant) == lines  # the same stream, byte for byte
    # the redacted entry arrived redacted, and is still never served
    tombstone = target.repository.get_entry(tenant, ids["secret"])
    assert (tombstone.title, tombstone.status) == (REDACTED_TEXT, EntryStatus.REDACTED)
    with pytest.raises(EntryRedactedError):
        target.get_entry(tenant, ids["secret"])
    # the vectors are the target's model's to make: none came, all are pending
    assert outcome.entries_awaiting_vectors == len(target.pending_jobs(tenant)) > 0
    assert target.embed_pending(tenant) == outcome.entries_awaiting_vectors
    assert [h.entry_id for h in target.query_org_memory(tenant, TOPIC).hits][:1] == [ids["lesson"]]
    before = projection(owner, tenant)

    # And a second import inserts nothing and leaves the projection (vectors too) alone
    again = LakeTransfer(target).import_stream(tenant, read_stream(lines))
    assert (again.inserted, again.present, again.projection_rebuilt) == (0, len(lines) - 1, False)
    assert projection(owner, tenant) == before
    assert target.pending_jobs(tenant) == []
    assert event_count(owner, tenant) == stream.manifest.count


def _tampered(lines: list[str], how: str) -> list[str]:
    changed = list(lines)
    if how == "edited payload":
        event = json.loads(changed[0])
        event["payload"]["summary"] += " (edited)"
        changed[0] = json.dumps(event, sort_keys=True, separators=(",", ":"))
    elif how == "dropped line":
        del changed[2]
    elif how == "moved line":
        changed[1], changed[2] = changed[2], changed[1]
    elif how == "edited manifest":
        document = json.loads(changed[-1])
        document["manifest"]["tenant_id"] = "someone-else"
        changed[-1] = json.dumps(document)
    elif how == "no manifest":
        del changed[-1]
    return changed


@pytest.mark.parametrize(
    "how", ["edited payload", "dropped line", "moved line", "edited manifest", "no manifest"]
)
def test_an_altered_stream_is_refused_with_nothing_stored(
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    other_tenant: str,
    how: str,
) -> None:
    service = merging_service(app_conn)
    for n in range(3):
        service.record_entry(
            tenant,
            entry(
                f"Queue consumer {n} stalled on a poison message",
                f"Consumer group {n} of the orders queue stalled on a poison message that "
                "failed deserialization and was redelivered without end.",
            ),
            context(),
        )
    lines = _tampered(exported(service, tenant), how)

    with pytest.raises(InvalidInputError) as refused:
        LakeTransfer(service).import_stream(
            other_tenant, read_stream(lines, source="file"), rename=True
        )

    assert refused.value.field == "file"
    assert event_count(admin_conn, other_tenant) == 0


def test_a_batch_altered_after_its_stream_was_checked_is_refused_by_the_chain(
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    other_tenant: str,
) -> None:
    """What the admin route relies on: each batch is checked against the manifest's chain
    before it is stored, whoever checked the stream before sending it."""
    service = merging_service(app_conn)
    build_lake(service, tenant)
    stream = read_stream(exported(service, tenant))
    transfer = LakeTransfer(service)
    edited = stream.events[0].model_copy(
        update={"payload": {**stream.events[0].payload, "title": "Something else entirely"}}
    )
    with pytest.raises(InvalidInputError) as refused:
        transfer.import_batch(
            other_tenant,
            stream.manifest,
            0,
            stream.links[0],
            stream.links[4],
            [edited, *stream.events[1:4]],
            rename=True,
        )
    assert refused.value.field == "events"
    # a batch started from a link of its own choosing is no first batch
    with pytest.raises(InvalidInputError) as unlinked:
        transfer.import_batch(
            other_tenant,
            stream.manifest,
            0,
            stream.links[1],
            stream.links[4],
            stream.events[1:4],
            rename=True,
        )
    assert unlinked.value.field == "chain_sha256"
    assert event_count(admin_conn, other_tenant) == 0


def test_another_organizations_stream_is_refused_unless_renamed(
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    other_tenant: str,
) -> None:
    source = merging_service(app_conn)
    ids = build_lake(source, tenant)
    stream = read_stream(exported(source, tenant))
    transfer = LakeTransfer(source)

    with pytest.raises(InvalidInputError) as refused:
        transfer.import_stream(other_tenant, stream)
    assert refused.value.field == "rename"
    assert tenant in refused.value.message
    assert event_count(admin_conn, other_tenant) == 0

    outcome = transfer.import_stream(other_tenant, stream, rename=True)

    assert outcome.tenant_id == other_tenant
    assert outcome.inserted == stream.manifest.count
    assert projection(admin_conn, other_tenant) == projection(admin_conn, tenant)
    assert source.repository.verify_projection(other_tenant).mismatches == []
    assert other_tenant in source.repository.tenant_ids()
    with pytest.raises(EntryRedactedError):
        source.get_entry(other_tenant, ids["secret"])
    # the renamed copy is the other organization's own: the source's is untouched
    assert source.repository.verify_projection(tenant).mismatches == []
    assert source.get_entry(other_tenant, ids["lesson"]).tenant_id == other_tenant


def test_an_organization_with_memory_of_its_own_takes_a_stream_only_to_merge(
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    other_tenant: str,
) -> None:
    service = merging_service(app_conn)
    build_lake(service, tenant)
    stream = read_stream(exported(service, tenant))
    own = service.record_entry(
        other_tenant,
        entry(
            "Kafka broker disk filled by an unbounded topic",
            "A debug topic without retention filled the broker disks until producers "
            "failed with timeouts across the cluster.",
        ),
        context(),
    ).entry
    transfer = LakeTransfer(service)

    with pytest.raises(InvalidInputError) as refused:
        transfer.import_stream(other_tenant, stream, rename=True)
    assert refused.value.field == "merge"
    assert event_count(admin_conn, other_tenant) == 1

    merged = transfer.import_stream(other_tenant, stream, rename=True, merge=True)
    assert merged.inserted == stream.manifest.count
    assert service.get_entry(other_tenant, own.entry_id).title.startswith("Kafka")
    assert service.repository.verify_projection(other_tenant).mismatches == []
    # a second import of the same stream is recognized as such: no merge needed
    again = transfer.import_stream(other_tenant, stream, rename=True)
    assert again.inserted == 0


def test_an_event_held_differently_under_the_same_key_refuses_the_batch(
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    other_tenant: str,
) -> None:
    """An import before a redaction, then the stream after it: the target holds the text
    under the keys the stream now has redacted. Refused, naming what to do."""
    service = merging_service(app_conn)
    created = service.record_entry(
        tenant,
        entry(
            "Certificate expired on the internal gateway",
            f"The internal gateway's certificate expired; the renewal job's token {MARKER} "
            "had been revoked a month earlier and nobody was paged.",
        ),
        context(),
    ).entry
    transfer = LakeTransfer(service)
    transfer.import_stream(other_tenant, read_stream(exported(service, tenant)), rename=True)
    service.redact_entry(tenant, created.entry_id, "a token was pasted", context())
    after = read_stream(exported(service, tenant))

    with pytest.raises(InvalidInputError) as refused:
        transfer.import_stream(other_tenant, after, rename=True)

    assert refused.value.field == "events"
    assert "grandbo redact" in refused.value.message
    assert event_count(admin_conn, other_tenant) == 1  # the redaction event was not stored


def _two_entries(service: MemoryService, tenant: str) -> list[Any]:
    return [
        service.record_entry(
            tenant,
            entry(
                f"Session store {n} evicted keys under memory pressure",
                f"Session store {n} hit its memory limit and evicted session keys; users "
                "were logged out in the middle of checkout.",
            ),
            context(),
        ).entry
        for n in range(2)
    ]


def test_an_export_racing_a_redaction_is_refused_rather_than_written_inconsistent(
    app_conn: psycopg.Connection[Any], tenant: str, other_tenant: str
) -> None:
    service = merging_service(app_conn)
    first_entry, _ = _two_entries(service, tenant)
    transfer = LakeTransfer(service)
    first = transfer.export_page(tenant, None, 1)
    assert first.next is not None
    service.record_entry(
        tenant,
        entry(
            "Later entry outside the export",
            "An entry recorded after the export began is not part of it: the first page "
            "fixed the export's last event.",
        ),
        context(),
    )
    service.redact_entry(tenant, first_entry.entry_id, "personal data", context())
    last = transfer.export_page(tenant, first.next, 10)
    # the later entry is not in it; the page written before the redaction no longer
    # matches the manifest, so the copy is refused whole
    assert last.manifest is not None
    assert last.manifest.count == 2
    with pytest.raises(InvalidInputError):
        read_stream(
            [first.events[0].line(), *(e.line() for e in last.events), last.manifest.line()]
        )

    # and the whole export compares the two itself
    class RedactingMidway(LakeTransfer):
        def export_page(self, tenant_id: str, after: str | None = None, limit: int = 500) -> Any:
            page = super().export_page(tenant_id, after, 1)
            if after is None:
                service.redact_entry(tenant_id, page.events[0].entry_id, "personal data", context())
            return page

    _two_entries(service, other_tenant)
    with pytest.raises(GrandboError, match="changed during the export"):
        RedactingMidway(service).export(other_tenant, lambda line: None)


def test_bad_export_arguments_name_their_field(
    app_conn: psycopg.Connection[Any], tenant: str
) -> None:
    transfer = LakeTransfer(merging_service(app_conn))
    for after in ("12", "lake1.5.9", "lake1.x.1"):
        with pytest.raises(InvalidInputError) as refused:
            transfer.export_page(tenant, after)
        assert refused.value.field == "after"
    for limit in (0, 1001):
        with pytest.raises(InvalidInputError) as refused:
            transfer.export_page(tenant, None, limit)
        assert refused.value.field == "limit"
    empty = transfer.export_page(tenant)
    assert (empty.events, empty.next, empty.manifest and empty.manifest.count) == ([], None, 0)


@pytest.fixture
def cli_env(database: DatabaseUrls, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", database.app)
    monkeypatch.setenv("GRANDBO_ADMIN_DATABASE_URL", database.admin)
    monkeypatch.setenv("GRANDBO_EMBEDDING_PROVIDER", "fake")


@pytest.mark.usefixtures("cli_env")
def test_the_command_line_exports_and_imports_a_lake(
    app_conn: psycopg.Connection[Any],
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    other_tenant: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    build_lake(merging_service(app_conn), tenant)
    lake = tmp_path / "lake.jsonl"

    assert main(["export", "--tenant", tenant, "-o", str(lake)]) == 0
    lines = lake.read_text().splitlines()
    manifest = json.loads(lines[-1])["manifest"]
    assert manifest["count"] == len(lines) - 1 == event_count(admin_conn, tenant)
    # the manifest's SHA-256 is that of the event lines, as `head -n -1 | sha256sum` sees it
    body = "".join(line + "\n" for line in lines[:-1]).encode()
    assert manifest["sha256"] == hashlib.sha256(body).hexdigest()
    capsys.readouterr()

    # another organization's stream: refused, naming --rename, nothing stored
    assert main(["import", str(lake), "--tenant", other_tenant, "--create-tenant"]) == 2
    assert "rename" in capsys.readouterr().err
    assert event_count(admin_conn, other_tenant) == 0

    assert main(["import", str(lake), "--tenant", other_tenant, "--rename"]) == 1
    assert f"no organization '{other_tenant}'" in capsys.readouterr().err  # a new one: asked for
    assert event_count(admin_conn, other_tenant) == 0
    new = ["import", str(lake), "--tenant", other_tenant, "--rename", "--create-tenant"]
    assert main(new) == 0
    out = capsys.readouterr().out
    assert f"{manifest['count']} new, 0 already there" in out
    assert "embedded with the local model" in out
    assert projection(admin_conn, other_tenant) == projection(admin_conn, tenant)
    assert main(["rebuild", "--tenant", other_tenant, "--verify-only"]) == 0
    capsys.readouterr()

    assert main(["import", str(lake), "--tenant", other_tenant, "--rename"]) == 0
    assert f"0 new, {manifest['count']} already there" in capsys.readouterr().out

    # a file altered by hand is refused before anything is stored
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join(_tampered(lines, "dropped line")) + "\n")
    third = f"{other_tenant}-3"
    assert main(["import", str(tampered), "--tenant", third, "--rename"]) == 2
    assert "manifest" in capsys.readouterr().err
    assert event_count(admin_conn, third) == 0
    assert main(["import", str(tmp_path / "missing.jsonl"), "--tenant", third]) == 2
    assert "cannot read" in capsys.readouterr().err


def _crafted(tenant: str, events: list[dict[str, Any]]) -> list[str]:
    """A stream of hand-made events with a manifest and chain that match them: what a
    hostile or broken exporter could send."""
    from grandbo.memory.domain.lake_stream import LakeEvent, StreamDigest

    digest = StreamDigest(tenant)
    lines = [digest.add(LakeEvent.model_validate(event)) for event in events]
    return [*lines, digest.manifest().line()]


def _event(entry_id: str, event_type: str, payload: dict[str, Any], n: int) -> dict[str, Any]:
    return {
        "entry_id": entry_id,
        "event_type": event_type,
        "revision": 1,
        "payload": payload,
        "actor": "crafted",
        "idempotency_key": f"crafted:{entry_id}:{n}",
        "recorded_at": f"2026-11-0{n + 1}T00:00:00+00:00",
    }


@pytest.mark.parametrize(
    "case",
    [
        "redaction before creation",
        "creation without a title",
        "redaction without an origin",
        "an origin no entry has",
        "a verdict no one gives",
        "a tombstone without its redaction",
        "merged into an entry of no event",
    ],
)
def test_a_stream_whose_log_cannot_be_replayed_is_refused_with_nothing_stored(
    case: str, repository: MemoryRepository, other_tenant: str, app_conn: Any
) -> None:
    """Break-it: a crafted stream with a valid manifest and chain was stored, then every
    replay of the organization raised (an append-only log cannot be repaired)."""
    entry_id = str(uuid.uuid4())
    created = {"title": "T", "summary": "S", "tags": [], "origin": "admin", "service": None}
    events = {
        "redaction before creation": [
            _event(entry_id, "entry_redacted", {"origin": "admin", "kind": "durable"}, 0),
            _event(entry_id, "entry_created", created, 1),
        ],
        "creation without a title": [_event(entry_id, "entry_created", {"origin": "admin"}, 0)],
        "redaction without an origin": [
            _event(entry_id, "entry_created", created, 0),
            _event(entry_id, "entry_redacted", {}, 1),
        ],
        "an origin no entry has": [
            _event(entry_id, "entry_created", {**created, "origin": "hacker"}, 0)
        ],
        "a verdict no one gives": [
            _event(entry_id, "entry_created", created, 0),
            _event(entry_id, "feedback_recorded", {"verdict": "lol", "incident_id": "I"}, 1),
        ],
        "a tombstone without its redaction": [
            _event(entry_id, "entry_created", {"redacted": True, "sha256": "0" * 64}, 0)
        ],
        "merged into an entry of no event": [
            _event(entry_id, "entry_created", created, 0),
            _event(entry_id, "entry_merged", {"merged_into": str(uuid.uuid4())}, 1),
        ],
    }[case]
    service = MemoryService(repository, FakeEmbeddingProvider())
    stream = read_stream(_crafted(other_tenant, events))
    with pytest.raises(InvalidInputError) as refused:
        LakeTransfer(service).import_stream(other_tenant, stream)
    assert refused.value.field.startswith("events")
    assert event_count(app_conn, other_tenant) == 0
    assert repository.verify_projection(other_tenant).mismatches == []


def test_an_import_reports_its_progress_batch_by_batch(
    service: MemoryService, tenant: str, other_tenant: str
) -> None:
    """Issue 45: long work shows progress; the CLI wraps the batches in a bar."""
    for n in range(7):
        service.record_entry(
            tenant,
            entry(f"Lesson number {n} about disks", f"The disk of host {n} filled up overnight."),
            context(),
        )
    stream = read_stream(exported(service, tenant))
    seen: list[tuple[list[int], int]] = []

    def progress(starts: Any, total: int) -> Any:
        listed = list(starts)
        seen.append((listed, total))
        return listed

    outcome = LakeTransfer(service).import_stream(
        other_tenant, stream, rename=True, batch_size=3, progress=progress
    )

    assert outcome.inserted == stream.manifest.count
    assert seen == [([0, 3, 6], 3)]
