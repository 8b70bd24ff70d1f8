"""Idempotency keys on the real store: colliding ids no longer drop a finding, and migration
0006 re-keys what earlier versions stored so redelivery still finds its first write."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.incidents import (
    corroborated_entries,
    parse_incident_closed,
    record_incident,
)
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.migrations import available_migrations, migrate
from grandbo.storage.connections import DatabaseUrls, connect
from grandbo.text.tags import tags_for

from .helpers import database_at


def _incident(tenant: str, incident_id: str, finding_id: str, title: str) -> Any:
    return parse_incident_closed(
        {
            "tenant_id": tenant,
            "incident_id": incident_id,
            "title": "Checkout latency",
            "closed_at": "2026-11-29T10:00:00Z",
            "findings": [
                {
                    "finding_id": finding_id,
                    "status": "corroborated",
                    "title": title,
                    "summary": f"{title}: the pool was exhausted by a retry storm after deploy.",
                }
            ],
        }
    )


def test_incidents_whose_ids_spell_each_others_keys_both_become_entries(
    service: MemoryService, tenant: str
) -> None:
    first = record_incident(service, _incident(tenant, "INC-9:finding:x", "y", "First lesson"))
    second = record_incident(service, _incident(tenant, "INC-9", "x:finding:y", "Second lesson"))

    assert [o.applied for o in first + second] == [True, True]
    assert first[0].entry.entry_id != second[0].entry.entry_id
    assert service.get_entry(tenant, second[0].entry.entry_id).title == "Second lesson"
    # and each redelivery is still a no-op that returns its own entry
    again = record_incident(service, _incident(tenant, "INC-9", "x:finding:y", "Second lesson"))
    assert again[0].applied is False
    assert again[0].entry.entry_id == second[0].entry.entry_id


@pytest.fixture
def v5_database(
    database: DatabaseUrls, admin_conn: psycopg.Connection[Any]
) -> Iterator[DatabaseUrls]:
    """A database of its own on the test server, migrated to version 5 only."""
    with database_at(database, admin_conn, 5) as urls:
        yield urls


def _old_event(conn: psycopg.Connection[Any], key: str, actor: str, **payload: Any) -> None:
    conn.execute(
        "INSERT INTO org_memory_events (tenant_id, entry_id, event_type, revision, payload,"
        " actor, idempotency_key) VALUES ('acme', %s, 'entry_created', 1, %s, %s, %s)",
        (uuid.uuid4(), Jsonb(payload), actor, key),
    )


def test_migration_0006_rekeys_stored_keys_one_to_one(v5_database: DatabaseUrls) -> None:
    entry_id = "0b9d2c1e-5a4f-4c3b-9a8d-7e6f5a4b3c2d"
    cli_key = "cli:add:3f2a1b0c-9d8e-4f7a-8b6c-5d4e3f2a1b0c"
    old_to_new = {
        # the collided key: the incident in the payload says which reading is true
        "incident:INC-9:finding:x:finding:y": "incident:INC-9%3Afinding%3Ax:finding:y",
        "incident:INC-1:finding:f1": "incident:INC-1:finding:f1",  # ordinary: unchanged
        # an admin's keys move under its signing key (actor admin:ops-key)
        "admin:create:batch:7": "admin:ops-key:create:batch%3A7",
        f"admin:correct:{entry_id}:r:2": f"admin:ops-key:correct:{entry_id}:r%3A2",
        "admin:ops-key:nonce-1": "admin:ops-key:nonce:nonce-1",
        "eval:doc:1": "eval:doc%3A1",
        # a CLI write that named the demo as its actor is still a CLI write
        "demo:x:y": "cli:add:demo%3Ax%3Ay",
        # the CLI's own generated key, and a raw key of the same shape: both re-keyed
        # the way the new CLI reads a raw key, so a retry of the raw one still matches
        cli_key: "cli:add:" + cli_key.replace(":", "%3A"),
        # a raw CLI key that spelled an incident's key moves to the CLI's space
        "incident:INC-2:finding:f9": "cli:add:incident%3AINC-2%3Afinding%3Af9",
        # a chain: "foo" takes "cli:add:foo", which the other row gives up in the same pass
        "foo": "cli:add:foo",
        "cli:add:foo": "cli:add:cli%3Aadd%3Afoo",
    }
    with connect(v5_database.admin) as conn:
        _old_event(
            conn,
            "incident:INC-9:finding:x:finding:y",
            "incident-closed:INC-9:finding:x",
            origin="incident",
            incident_id="INC-9:finding:x",
        )
        _old_event(
            conn,
            "incident:INC-1:finding:f1",
            "incident-closed:INC-1",
            origin="incident",
            incident_id="INC-1",
        )
        _old_event(conn, "admin:create:batch:7", "admin:ops-key", origin="admin")
        _old_event(conn, f"admin:correct:{entry_id}:r:2", "admin:ops-key", origin="admin")
        _old_event(conn, "admin:ops-key:nonce-1", "admin:ops-key", origin="admin")
        _old_event(conn, "eval:doc:1", "grandbo-eval", origin="incident")
        _old_event(conn, "demo:x:y", "grandbo-demo", origin="admin")
        _old_event(conn, cli_key, "cli", origin="admin")
        _old_event(conn, "incident:INC-2:finding:f9", "cli", origin="admin")
        _old_event(conn, "foo", "cli", origin="admin")
        _old_event(conn, "cli:add:foo", "cli", origin="admin")

    applied = migrate(v5_database.admin)

    assert [m.version for m in applied] == [m.version for m in available_migrations()][5:]
    with connect(v5_database.admin) as conn:
        keys = {row[0] for row in conn.execute("SELECT idempotency_key FROM org_memory_events")}
        assert keys == set(old_to_new.values())
        # the guards are back: the log refuses UPDATE, RLS is forced
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE org_memory_events SET actor = 'x'")
        forced = conn.execute(
            "SELECT relforcerowsecurity FROM pg_class WHERE relname = 'org_memory_events'"
        ).fetchone()
        assert forced == (True,)


def test_after_the_migration_the_dropped_finding_is_written_and_the_kept_one_is_not_again(
    v5_database: DatabaseUrls,
) -> None:
    # Given a store where only the first of two colliding findings was written (old key):
    # the event the code before 0006 appended, with the key it made by joining the ids
    with connect(v5_database.admin) as conn:
        conn.execute("INSERT INTO org_memory_tenants (tenant_id) VALUES ('acme')")
    (finding,) = corroborated_entries(_incident("acme", "INC-9:finding:x", "y", "First lesson"))
    new_entry = finding[1]
    entry_id = uuid.uuid4()
    with connect(v5_database.admin) as conn:
        conn.execute(
            "INSERT INTO org_memory_events (tenant_id, entry_id, event_type, revision, payload,"
            " actor, idempotency_key) VALUES ('acme', %s, 'entry_created', 1, %s, %s, %s)",
            (
                entry_id,
                Jsonb(
                    {
                        "title": new_entry.title,
                        "summary": new_entry.summary,
                        "service": new_entry.service,
                        "tags": tags_for(
                            [new_entry.title, new_entry.summary, new_entry.service or ""],
                            new_entry.tags,
                        ),
                        "origin": new_entry.origin.value,
                        "incident_id": new_entry.incident_id,
                    }
                ),
                "incident-closed:INC-9:finding:x",
                "incident:INC-9:finding:x:finding:y",
            ),
        )
    # When the migration runs (the projection rebuilt from the log) and both incidents are
    # delivered again
    migrate(v5_database.admin)
    conn = connect(v5_database.app)
    service = MemoryService(MemoryRepository(conn), FakeEmbeddingProvider())
    service.repository.rebuild_projection("acme")
    first = record_incident(service, _incident("acme", "INC-9:finding:x", "y", "First lesson"))
    second = record_incident(service, _incident("acme", "INC-9", "x:finding:y", "Second lesson"))
    # Then the first is recognised, the second (dropped before) is written now
    assert (first[0].applied, first[0].entry.entry_id) == (False, entry_id)
    assert second[0].applied is True
    assert service.repository.verify_projection("acme").mismatches == []
    conn.close()
