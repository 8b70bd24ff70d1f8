"""Issue 34, point 4: a tombstone never holds a vector. An embed of an entry's text that
finishes after its redaction stored the removed text's vector on the tombstone (the
redaction does not move the revision, which was all store_embeddings checked)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from grandbo.memory.curation.audit import audit, repair
from grandbo.memory.service import MemoryService

from .helpers import context, entry


def test_an_embed_that_finishes_after_the_redaction_stores_nothing(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    created = service.record_entry(
        tenant,
        entry(
            "Token pasted in a lesson",
            "the deploy log of payments printed the live api token in plain text",
        ),
        context(),
    ).entry
    # the worker read the job and embedded the text, then the redaction committed
    vector = service.provider.embed_one(f"{created.title}\n{created.summary}")
    service.redact_entry(tenant, created.entry_id, "a credential was pasted", context())
    stored = service.repository.store_embeddings(
        tenant, service.provider.embed_rev, [(created.entry_id, created.revision, vector)]
    )
    assert stored == 0
    row = admin_conn.execute(
        "SELECT status, embedding IS NULL AS empty FROM org_memory_entries"
        " WHERE tenant_id = %s AND entry_id = %s",
        (tenant, created.entry_id),
    ).fetchone()
    assert row == ("redacted", True)
    # whatever path writes, the database refuses a vector on a tombstone
    with pytest.raises(psycopg.errors.CheckViolation, match="tombstone holds no vector"):
        admin_conn.execute(
            "UPDATE org_memory_entries SET embedding = %s WHERE tenant_id = %s AND entry_id = %s",
            ("[" + ",".join(["0.03"] * 1024) + "]", tenant, created.entry_id),
        )


def test_a_vector_already_on_a_tombstone_is_reported_and_repaired(
    service: MemoryService, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    kept = service.record_entry(
        tenant,
        entry(
            "Checkout pool exhausted",
            "checkout requests waited for a free database connection from the pool",
        ),
        context(),
    ).entry
    gone = service.record_entry(
        tenant,
        entry(
            "Password in a runbook",
            "the runbook for payments listed the database admin password in plain text",
        ),
        context(),
    ).entry
    service.embed_pending(tenant)
    service.redact_entry(tenant, gone.entry_id, "a password was pasted", context())
    assert audit(service, tenant).healthy
    # what an earlier version let happen: the removed text's vector on the tombstone
    admin_conn.execute("SET session_replication_role = replica")  # triggers off, here only
    admin_conn.execute(
        "UPDATE org_memory_entries e SET embedding = k.embedding, embed_rev = k.embed_rev,"
        " embedded_revision = e.revision, embedded_at = now() FROM org_memory_entries k"
        " WHERE k.tenant_id = %s AND k.entry_id = %s AND e.tenant_id = %s AND e.entry_id = %s",
        (tenant, kept.entry_id, tenant, gone.entry_id),
    )
    admin_conn.execute("SET session_replication_role = origin")
    report = service.repository.verify_projection(tenant)
    assert f"entry {gone.entry_id}: a redacted entry holds a vector" in report.mismatches
    health = audit(service, tenant)
    assert not health.healthy
    drift = next(f for f in health.findings if f.check == "projection_drift")
    assert "redacted entry holds a vector" in drift.detail
    repair(service, health)
    assert audit(service, tenant).healthy
    row = admin_conn.execute(
        "SELECT embedding IS NULL FROM org_memory_entries WHERE tenant_id = %s AND entry_id = %s",
        (tenant, gone.entry_id),
    ).fetchone()
    assert row == (True,)
    # the other entry kept its vector through the repair's rebuild
    row = admin_conn.execute(
        "SELECT embedding IS NOT NULL FROM org_memory_entries"
        " WHERE tenant_id = %s AND entry_id = %s",
        (tenant, kept.entry_id),
    ).fetchone()
    assert row == (True,)
