"""The bytes of a redacted text leave the table files (issue 34, point 5): after the
clean-up the runbook named before (plain VACUUM of events and entries, a checkpoint) the
marker was still found with `grep -a` in the relation files; `grandbo rewrite-redacted`
rewrites what holds it, and then no relation file of the database holds it."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from grandbo.cli import main
from grandbo.memory.domain.retrieval_log import RetrievalRecord
from grandbo.memory.service import MemoryService

from .helpers import context, entry

pytestmark = pytest.mark.skipif(
    os.environ.get("GRANDBO_TEST_DATABASE_URL") is not None,
    reason="reads the relation files of the embedded server",
)


def files_holding(owner: psycopg.Connection[Any], marker: bytes) -> list[str]:
    """The relations of the database whose files hold `marker` (every segment)."""
    data = Path(str(owner.execute("SHOW data_directory").fetchone()[0]))  # type: ignore[index]
    owner.execute("CHECKPOINT")
    rows = owner.execute(
        "SELECT c.relname, pg_relation_filepath(c.oid) FROM pg_class c"
        " WHERE c.relkind IN ('r', 'i', 't', 'm', 'p') AND pg_relation_filepath(c.oid) IS NOT NULL"
    ).fetchall()
    holding = []
    for name, relative in rows:
        base = data / relative
        segments = [base, *sorted(base.parent.glob(base.name + ".[0-9]*"))]
        if any(p.exists() and marker in p.read_bytes() for p in segments):
            holding.append(name)
    return sorted(holding)


def test_rewrite_redacted_takes_the_removed_text_out_of_every_relation_file(
    own_database: tuple[MemoryService, psycopg.Connection[Any]],
    tenant: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    service, owner = own_database
    marker = f"zq7{uuid.uuid4().hex[:10]}x"
    lesson = service.record_entry(
        tenant,
        entry(
            f"Credential {marker} pasted into the payments incident",
            f"The on-call pasted the admin password {marker} into the incident channel while "
            "rotating the payments database nodes after the failover.",
            service="payments-db",
        ),
        context(),
    ).entry
    service.embed_pending(tenant)
    service.record_feedback(
        tenant,
        lesson.entry_id,
        {"verdict": "helpful", "incident_id": "INC-4", "note": f"the {marker} one"},
        context(),
    )
    # a question quoting it, and its spellings: the log's table files (issue 52)
    service.repository.log_retrievals(
        [
            RetrievalRecord.model_construct(
                tenant_id=tenant,
                at=datetime.now(UTC) - timedelta(minutes=1),
                caller="pasted",
                incident_id=None,
                topic=f"who pasted {marker} into the channel",
                hits=[],
                latency_ms=1.0,
                no_precedent=True,
            )
        ]
    )
    outcome = service.redact_entry(tenant, lesson.entry_id, "a credential was pasted", context())
    assert outcome.rewrite_pending is True
    assert "grandbo rewrite-redacted" in outcome.rewrite_note

    # the clean-up the runbook named before leaves the bytes in the files
    owner.execute("VACUUM org_memory_events, org_memory_entries")
    before = files_holding(owner, marker.encode())
    assert before, "the plain VACUUM was expected to leave the marker somewhere"

    assert main(["rewrite-redacted", "--tenant", tenant, "--yes"]) == 0
    said = capsys.readouterr().out
    assert "VACUUM FULL org_memory_entries_p" in said
    assert "VACUUM FULL org_memory_retrieval_spellings" in said
    assert "ACCESS EXCLUSIVE lock" in said  # it says what it locks before it runs
    assert " s\n" in said  # and how long each took

    assert files_holding(owner, marker.encode()) == []
    # what a redaction keeps is still there and whole
    assert service.repository.verify_projection(tenant).mismatches == []
    assert service.repository.tombstone(tenant, lesson.entry_id) is not None
